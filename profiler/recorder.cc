#include "profiler/recorder.h"

#include <chrono>

#include "nvtx3/nvToolsExt.h"

namespace conveyor::profiler {
namespace {

struct ThreadRegistry {
  std::mutex mutex;
  std::vector<std::string> names;  // by thread number
};

ThreadRegistry& Threads() {
  static auto* registry = new ThreadRegistry;
  return *registry;
}

}  // namespace

Recorder& Recorder::Global() {
  static auto* recorder = new Recorder;
  return *recorder;
}

void Recorder::Add(Span span) {
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.push_back(std::move(span));
}

std::vector<Span> Recorder::Take() {
  std::vector<Span> taken;
  std::lock_guard<std::mutex> lock(mutex_);
  taken.swap(spans_);
  return taken;
}

int Recorder::ThisThread() {
  thread_local int number = [] {
    ThreadRegistry& threads = Threads();
    std::lock_guard<std::mutex> lock(threads.mutex);
    const int n = static_cast<int>(threads.names.size());
    threads.names.push_back(n == 0 ? "main" : "thread " + std::to_string(n));
    return n;
  }();
  return number;
}

std::vector<std::string> Recorder::ThreadNames() const {
  ThreadRegistry& threads = Threads();
  std::lock_guard<std::mutex> lock(threads.mutex);
  return threads.names;
}

double Recorder::NowMicros() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Scope::Scope(const char* category, std::string name, std::string args)
    : recording_(Recorder::Global().active()) {
  if (!recording_) return;
  span_.name = std::move(name);
  span_.category = category;
  span_.args = std::move(args);
  span_.thread = Recorder::ThisThread();
  nvtxRangePushA(span_.name.c_str());
  span_.start_us = Recorder::NowMicros();
}

Scope::~Scope() {
  if (!recording_) return;
  span_.end_us = Recorder::NowMicros();
  nvtxRangePop();
  Recorder::Global().Add(std::move(span_));
}

}  // namespace conveyor::profiler
