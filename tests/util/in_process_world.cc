#include "tests/util/in_process_world.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

namespace conveyor {
namespace testing_util {
namespace {

class InProcessCommunicator : public Communicator {
 public:
  InProcessCommunicator(InProcessWorld* world, int rank)
      : world_(world), rank_(rank), name_("in-process-world") {}

  int rank() const override { return rank_; }
  int size() const override { return world_->size(); }
  const std::string& name() const override { return name_; }

  absl::Status AllReduceSum(float* data, int64_t n) override { return Reduce(data, n, true); }
  absl::Status AllReduceSum(double* data, int64_t n) override { return Reduce(data, n, true); }
  absl::Status AllReduceMax(double* data, int64_t n) override { return Reduce(data, n, false); }
  absl::Status AllGather(const float* in, int64_t n, float* out) override {
    struct Slot {
      const float* in;
      float* out;
    };
    Slot slot{in, out};
    world_->Meet(rank_, &slot, [n](std::vector<void*>& all) {
      std::vector<float> gathered;
      for (void* p : all) {
        const float* from = static_cast<Slot*>(p)->in;
        gathered.insert(gathered.end(), from, from + n);
      }
      for (void* p : all) std::copy(gathered.begin(), gathered.end(), static_cast<Slot*>(p)->out);
    });
    return absl::OkStatus();
  }
  absl::Status ReduceScatterSum(const float*, int64_t, float*) override {
    return absl::UnimplementedError("ReduceScatterSum in InProcessWorld");
  }
  absl::Status Broadcast(float* data, int64_t n, int root) override {
    world_->Meet(rank_, data, [n, root](std::vector<void*>& all) {
      const float* src = static_cast<float*>(all[root]);
      for (void* p : all) {
        if (p != src) std::memcpy(p, src, n * sizeof(float));
      }
    });
    return absl::OkStatus();
  }
  absl::Status Barrier() override {
    world_->Meet(rank_, nullptr, [](std::vector<void*>&) {});
    return absl::OkStatus();
  }
  // Sends never wait, so posting every send before the first receive is the
  // deadlock-free order the interface promises.
  absl::Status BatchSendRecv(const std::vector<P2POp>& ops) override {
    for (const P2POp& op : ops) {
      if (op.peer < 0 || op.peer >= size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("BatchSendRecv in InProcessWorld: peer ", op.peer, " of ", size()));
      }
      if (op.is_send) world_->Send(rank_, op.peer, op.data, op.n);
    }
    for (const P2POp& op : ops) {
      if (op.is_send) continue;
      if (absl::Status s = world_->Receive(op.peer, rank_, op.data, op.n); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  template <typename T>
  absl::Status Reduce(T* data, int64_t n, bool sum) {
    world_->Meet(rank_, data, [n, sum](std::vector<void*>& all) {
      std::vector<T> acc(static_cast<T*>(all[0]), static_cast<T*>(all[0]) + n);
      for (size_t r = 1; r < all.size(); ++r) {
        const T* x = static_cast<T*>(all[r]);
        for (int64_t i = 0; i < n; ++i) acc[i] = sum ? acc[i] + x[i] : std::max(acc[i], x[i]);
      }
      for (void* p : all) std::copy(acc.begin(), acc.end(), static_cast<T*>(p));
    });
    return absl::OkStatus();
  }

  InProcessWorld* world_;
  int rank_;
  std::string name_;
};

}  // namespace

InProcessWorld::InProcessWorld(int size) : posted_(size, nullptr) {
  for (int r = 0; r < size; ++r) comms_.push_back(std::make_unique<InProcessCommunicator>(this, r));
}

InProcessWorld::~InProcessWorld() = default;

void InProcessWorld::Meet(int rank, void* buffer,
                          const std::function<void(std::vector<void*>&)>& fn) {
  std::unique_lock<std::mutex> lock(mu_);
  // Wait until the previous meeting has emptied out.
  cv_.wait(lock, [&] { return leaving_ == 0; });
  const int64_t generation = generation_;
  posted_[rank] = buffer;
  if (++arrived_ == size()) {
    fn(posted_);
    arrived_ = 0;
    leaving_ = size();
    ++generation_;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return generation_ != generation; });
  }
  if (--leaving_ == 0) cv_.notify_all();
}

void InProcessWorld::Send(int from, int to, const float* data, int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  mailboxes_[{from, to}].emplace_back(data, data + n);
  cv_.notify_all();
}

absl::Status InProcessWorld::Receive(int from, int to, float* data, int64_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  std::deque<std::vector<float>>& mailbox = mailboxes_[{from, to}];
  cv_.wait(lock, [&] { return !mailbox.empty(); });
  const std::vector<float> message = std::move(mailbox.front());
  mailbox.pop_front();
  if (static_cast<int64_t>(message.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("InProcessWorld: rank ", to, " receives ", n,
                                                   " elements from rank ", from, ", which sent ",
                                                   message.size()));
  }
  std::copy(message.begin(), message.end(), data);
  return absl::OkStatus();
}

std::vector<absl::Status> InProcessWorld::Run(
    const std::function<absl::Status(int, Communicator&)>& fn) {
  std::vector<absl::Status> results(size());
  std::vector<std::thread> threads;
  for (int r = 0; r < size(); ++r) {
    threads.emplace_back([&, r] { results[r] = fn(r, *comms_[r]); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

}  // namespace testing_util
}  // namespace conveyor
