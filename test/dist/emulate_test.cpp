// Emulated heterogeneity: parsing, errors that name the option, sleep arithmetic, schedule.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "hetrain/dist/emulate.hpp"
#include "hetrain/error.hpp"

using namespace hetrain;
using namespace hetrain::dist;

namespace {
std::string error_of(const std::string& speeds, const std::string& schedule, int n) {
  try {
    SpeedEmulator e(speeds, schedule, n);
  } catch (const AgreedError& e) {  // bad options fail identically on every rank
    return e.what();
  } catch (const Error& e) {
    return std::string("not an AgreedError: ") + e.what();
  }
  return "";
}
}  // namespace

TEST(SpeedEmulator, InactiveByDefault) {
  SpeedEmulator e;
  EXPECT_FALSE(e.active());
  EXPECT_EQ(e.sleep_seconds(0, 0, 1.0), 0.0);
  SpeedEmulator f("", "", 4);
  EXPECT_FALSE(f.active());
  EXPECT_EQ(f.speed(3, 100), 1.0);
}

TEST(SpeedEmulator, SleepsInverseSpeedMinusOne) {
  SpeedEmulator e("1,1,0.5,0.25", "", 4);
  EXPECT_TRUE(e.active());
  EXPECT_DOUBLE_EQ(e.sleep_seconds(0, 0, 0.2), 0.0);
  EXPECT_DOUBLE_EQ(e.sleep_seconds(2, 0, 0.2), 0.2);
  EXPECT_DOUBLE_EQ(e.sleep_seconds(3, 7, 0.2), 0.6);
  EXPECT_EQ(e.sleep_seconds(3, 7, 0.0), 0.0);
  EXPECT_NE(e.describe().find("EMULATED"), std::string::npos);
  EXPECT_NE(e.describe().find("not real hardware"), std::string::npos);
}

TEST(SpeedEmulator, ScheduleChangesSpeedFromAStep) {
  SpeedEmulator e("1,1,1,1", "100:1:0.3333333333333333,200:1:1,150:2:0.5", 4);
  EXPECT_EQ(e.speed(1, 99), 1.0);
  EXPECT_NEAR(e.sleep_seconds(1, 100, 0.1), 0.2, 1e-12);
  EXPECT_EQ(e.speed(2, 149), 1.0);
  EXPECT_EQ(e.speed(2, 150), 0.5);
  EXPECT_EQ(e.speed(1, 250), 1.0);
  EXPECT_NE(e.describe().find("from step 100 rank 1"), std::string::npos) << e.describe();
  SpeedEmulator only_schedule("", "5:0:0.5", 2);
  EXPECT_TRUE(only_schedule.active());
  EXPECT_EQ(only_schedule.speed(0, 4), 1.0);
  EXPECT_EQ(only_schedule.speed(0, 5), 0.5);
}

TEST(SpeedEmulator, BadInputNamesTheOption) {
  EXPECT_NE(error_of("1,1,0.5", "", 4).find("--emulate-speed: expected 4 speeds"), std::string::npos);
  EXPECT_NE(error_of("1,0,1,1", "", 4).find("--emulate-speed: speed must be > 0"), std::string::npos);
  EXPECT_NE(error_of("1,-2,1,1", "", 4).find("--emulate-speed"), std::string::npos);
  EXPECT_NE(error_of("1,x,1,1", "", 4).find("is not a number"), std::string::npos);
  EXPECT_NE(error_of("1,2,1,1", "", 4).find("> 1 cannot be emulated"), std::string::npos);
  EXPECT_NE(error_of("", "10:4:0.5", 4).find("--emulate-schedule: rank 4"), std::string::npos);
  EXPECT_NE(error_of("", "10:1", 4).find("--emulate-schedule: expected STEP:RANK:SPEED"), std::string::npos);
  EXPECT_NE(error_of("", "10:1:0", 4).find("--emulate-schedule: speed must be > 0"), std::string::npos);
  EXPECT_NE(error_of("", "-3:1:0.5", 4).find("--emulate-schedule: step"), std::string::npos);
  EXPECT_EQ(error_of("1, 0.5", "", 2), "");
}

// Set-up steps (the process's first, one that made kernels) are not multiplied: a slow rank's one-off JIT
// would otherwise cost it 1/s times over and trip the stall watchdog in short runs.
TEST(SpeedEmulator, SetupStepsAreNotEmulated) {
  SpeedEmulator e("1,0.25", "", 2);
  EXPECT_EQ(e.apply(1, 0, 100.0, /*setup_step=*/true), 0.0) << "would have slept 300 s";
  EXPECT_NEAR(e.apply(1, 1, 0.001), 0.003, 1e-12);
}

// A CPU rank is emulated from the CPU time of its compute thread: time asleep or waiting for a core is not
// counted (and so not multiplied by 1/s), time computing is.
TEST(SpeedEmulator, ThreadCpuTimeCountsComputingNotWaiting) {
  const double a = SpeedEmulator::thread_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double b = SpeedEmulator::thread_cpu_seconds();
  EXPECT_LT(b - a, 0.02) << "100 ms asleep counted as CPU time";
  volatile double x = 0;
  for (int i = 0; i < 20000000; ++i) x = x + 1e-9 * i;
  const double c = SpeedEmulator::thread_cpu_seconds();
  EXPECT_GT(c - b, 0.001) << "20 M additions took no CPU time";
}
