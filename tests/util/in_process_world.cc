#include "tests/util/in_process_world.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "parallel/rank_order_reduction.h"

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
  bool Reaches(MemoryKind where) const override { return where == MemoryKind::kHost; }
  absl::Status Barrier() override {
    world_->Meet(rank_, nullptr, [](std::vector<void*>&) {});
    return absl::OkStatus();
  }

 protected:
  absl::Status DoAllReduceSum(const Buffer& data) override {
    return Reduce(Reduction::kSum, data, data, data.count);
  }
  absl::Status DoAllReduceMax(const Buffer& data) override {
    return Reduce(Reduction::kMax, data, data, data.count);
  }
  absl::Status DoReduceScatterSum(const ConstBuffer& in, const Buffer& out) override {
    return Reduce(Reduction::kSum, in, out, out.count);
  }
  absl::Status DoAllGather(const ConstBuffer& in, const Buffer& out) override {
    Slot slot{in, out};
    world_->Meet(rank_, &slot, [](std::vector<void*>& all) {
      std::vector<char> gathered;
      for (void* p : all) {
        const ConstBuffer& from = static_cast<Slot*>(p)->in;
        const char* bytes = static_cast<const char*>(from.data);
        gathered.insert(gathered.end(), bytes, bytes + from.bytes());
      }
      for (void* p : all)
        std::memcpy(static_cast<Slot*>(p)->out.data, gathered.data(), gathered.size());
    });
    return absl::OkStatus();
  }
  absl::Status DoBroadcast(const Buffer& data, int root) override {
    Buffer mine = data;
    world_->Meet(rank_, &mine, [root](std::vector<void*>& all) {
      const Buffer& src = *static_cast<Buffer*>(all[root]);
      for (void* p : all) {
        const Buffer& dst = *static_cast<Buffer*>(p);
        if (dst.data != src.data) std::memcpy(dst.data, src.data, src.bytes());
      }
    });
    return absl::OkStatus();
  }
  // Sends never wait, so posting every send before the first receive is the
  // deadlock-free order the interface promises.
  absl::Status DoBatchSendRecv(const std::vector<P2POp>& ops) override {
    for (const P2POp& op : ops) {
      if (op.is_send) world_->Send(rank_, op.peer, op.buffer.data, op.buffer.bytes());
    }
    for (const P2POp& op : ops) {
      if (op.is_send) continue;
      if (absl::Status s = world_->Receive(op.peer, rank_, op.buffer.data, op.buffer.bytes());
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

 private:
  struct Slot {
    ConstBuffer in;
    Buffer out;
  };

  // Every rank's slot r of `in` (of `n` elements) reduced in rank order into rank r's
  // `out`; an all-reduce is the case of one slot, which every rank receives.
  absl::Status Reduce(Reduction op, const ConstBuffer& in, const Buffer& out, int64_t n) {
    Slot slot{in, out};
    world_->Meet(rank_, &slot, [op, n](std::vector<void*>& all) {
      const int ranks = static_cast<int>(all.size());
      const ConstBuffer& first = static_cast<Slot*>(all[0])->in;
      const bool scatter = first.count != n;
      const int64_t bytes = n * static_cast<int64_t>(SizeOf(first.type));
      std::vector<std::vector<char>> results;
      for (int slot_index = 0; slot_index < (scatter ? ranks : 1); ++slot_index) {
        std::vector<char> parts;
        for (void* p : all) {
          const char* from = static_cast<const char*>(static_cast<Slot*>(p)->in.data);
          parts.insert(parts.end(), from + slot_index * bytes, from + (slot_index + 1) * bytes);
        }
        results.emplace_back(bytes);
        ReduceInRankOrder(op, first.type, parts.data(), ranks, n, results.back().data());
      }
      for (int r = 0; r < ranks; ++r) {
        std::memcpy(static_cast<Slot*>(all[r])->out.data, results[scatter ? r : 0].data(), bytes);
      }
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

void InProcessWorld::Send(int from, int to, const void* data, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const char* begin = static_cast<const char*>(data);
  mailboxes_[{from, to}].emplace_back(begin, begin + bytes);
  cv_.notify_all();
}

absl::Status InProcessWorld::Receive(int from, int to, void* data, int64_t bytes) {
  std::unique_lock<std::mutex> lock(mu_);
  std::deque<std::vector<char>>& mailbox = mailboxes_[{from, to}];
  cv_.wait(lock, [&] { return !mailbox.empty(); });
  const std::vector<char> message = std::move(mailbox.front());
  mailbox.pop_front();
  if (static_cast<int64_t>(message.size()) != bytes) {
    return absl::InvalidArgumentError(absl::StrCat("InProcessWorld: rank ", to, " receives ", bytes,
                                                   " bytes from rank ", from, ", which sent ",
                                                   message.size()));
  }
  std::copy(message.begin(), message.end(), static_cast<char*>(data));
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
