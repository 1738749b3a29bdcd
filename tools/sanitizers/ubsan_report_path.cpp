// Sanitizer builds with GCC only (CMakeLists.txt adds this file to libquilt). GCC's ASan and
// UBSan are two runtimes, and UBSan sets its log_path through __sanitizer_set_report_path, which
// libasan exports too and so interposes: UBSan's reports went to stderr (and ASan's to UBSan's
// log_path), where a test that expects a failing exit code hides them. When libquilt loads, this
// gives UBSan's own runtime the log_path of UBSAN_OPTIONS, so tools/test.sh finds every report.
#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace {

__attribute__((constructor)) void route_ubsan_reports() {
  const char* options = std::getenv("UBSAN_OPTIONS");
  if (!options) return;
  const std::string s = std::string(":") + options;
  const std::string key = ":log_path=";
  const size_t at = s.find(key);
  if (at == std::string::npos) return;
  const size_t begin = at + key.size();
  const std::string path = s.substr(begin, s.find(':', begin) - begin);
  void* ubsan = dlopen("libubsan.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!ubsan) return;
  using SetPath = void (*)(const char*);
  if (auto set = reinterpret_cast<SetPath>(dlsym(ubsan, "__sanitizer_set_report_path")))
    set(path.c_str());
  dlclose(ubsan);
}

}  // namespace
