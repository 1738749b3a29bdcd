// A deliberate data race, built only in ThreadSanitizer builds (tests/CMakeLists.txt): the
// tsan_detects_a_race test runs it through tools/tsan.sh exec and requires TSan's report and exit
// code 66, so the options and suppressions the tsan_* tests run with are shown to fail on a race
// in Quilt's code rather than pass whatever happens.
#include <cstdio>
#include <thread>

namespace {
int counter = 0;  // written by two threads without synchronisation: the race TSan must report
}

int main() {
  auto bump = [] {
    for (int i = 0; i < 1000; ++i) counter = counter + 1;
  };
  std::thread a(bump), b(bump);
  a.join();
  b.join();
  std::printf("counter %d\n", counter);
  return 0;
}
