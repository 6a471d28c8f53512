// The communication thread: jobs run in launch order on one thread, Wait returns once
// its job ran (at once for a job never launched), the first error is every later
// answer and skips the jobs after it, and Forget lets a step launch the same ids again.
#include "trainer/optimization/communication_thread.h"

#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

class Recorder {
 public:
  absl::Status Run(size_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    ran_.push_back(id);
    threads_.push_back(std::this_thread::get_id());
    return id == fail_on_ ? absl::DeadlineExceededError("job failed") : absl::OkStatus();
  }
  std::vector<size_t> ran() {
    std::lock_guard<std::mutex> lock(mu_);
    return ran_;
  }
  std::vector<std::thread::id> threads() {
    std::lock_guard<std::mutex> lock(mu_);
    return threads_;
  }
  size_t fail_on_ = ~size_t{0};

 private:
  std::mutex mu_;
  std::vector<size_t> ran_;
  std::vector<std::thread::id> threads_;
};

TEST(CommunicationThreadTest, RunsJobsInLaunchOrderOnItsOwnThread) {
  Recorder recorder;
  CommunicationThread thread([&](size_t id) { return recorder.Run(id); });
  for (size_t id : {3, 1, 2}) thread.Launch(id);
  EXPECT_TRUE(thread.Wait(1).ok());
  EXPECT_TRUE(thread.WaitAll().ok());
  EXPECT_EQ(recorder.ran(), (std::vector<size_t>{3, 1, 2}));
  for (const std::thread::id& t : recorder.threads()) EXPECT_NE(t, std::this_thread::get_id());
  EXPECT_TRUE(thread.Launched(2));
  EXPECT_FALSE(thread.Launched(7));
  EXPECT_TRUE(thread.Wait(7).ok());  // never launched: nothing to wait for
}

TEST(CommunicationThreadTest, TheFirstErrorSkipsLaterJobsAndIsEveryAnswer) {
  Recorder recorder;
  recorder.fail_on_ = 2;
  CommunicationThread thread([&](size_t id) { return recorder.Run(id); });
  for (size_t id : {1, 2, 3}) thread.Launch(id);
  EXPECT_TRUE(absl::IsDeadlineExceeded(thread.Wait(3)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(thread.WaitAll()));
  EXPECT_EQ(recorder.ran(), (std::vector<size_t>{1, 2}));  // 3 was skipped
}

TEST(CommunicationThreadTest, ForgetLetsTheNextStepLaunchTheSameJobs) {
  Recorder recorder;
  CommunicationThread thread([&](size_t id) { return recorder.Run(id); });
  thread.Launch(0);
  EXPECT_TRUE(thread.WaitAll().ok());
  thread.Forget();
  EXPECT_FALSE(thread.Launched(0));
  thread.Launch(0);
  EXPECT_TRUE(thread.Wait(0).ok());
  EXPECT_EQ(recorder.ran(), (std::vector<size_t>{0, 0}));
}

TEST(CommunicationThreadTest, DestructionFinishesTheQueue) {
  Recorder recorder;
  {
    CommunicationThread thread([&](size_t id) { return recorder.Run(id); });
    for (size_t id = 0; id < 50; ++id) thread.Launch(id);
  }
  EXPECT_EQ(recorder.ran().size(), 50u);
}

}  // namespace
}  // namespace conveyor
