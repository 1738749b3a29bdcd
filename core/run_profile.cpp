// RunProfile as a Chrome trace (quilt bench --profile, the Python package's end_profiling).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>

#include "core/json.hpp"
#include "quilt/quilt.hpp"

namespace quilt {
namespace {

std::string micros(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

void sort_by_start(std::vector<RunProfile::Span>& spans) {
  std::stable_sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
}

}  // namespace

// The trace event format's JSON object form: "X" (complete) events with ts/dur in µs from the
// first span, pid 1, a tid per lane named by "thread_name" metadata. Lanes are numbered in order
// of their first span. A node span is clamped into the patch span on its lane that it overlaps
// most: device timestamps and host timestamps can disagree by a little, and the viewers only
// nest an event inside another when it lies wholly within it.
std::string RunProfile::to_chrome_trace(const std::string& process_name) const {
  std::vector<Span> sorted = spans;
  sort_by_start(sorted);
  for (auto& s : sorted) {
    if (s.kind != "node") continue;
    const Span* best = nullptr;
    int64_t best_overlap = INT64_MIN;  // the nearest patch when it overlaps none
    for (const auto& p : sorted) {
      if (p.kind != "patch" || p.lane != s.lane) continue;
      const int64_t overlap = static_cast<int64_t>(std::min(s.end_ns, p.end_ns)) -
                              static_cast<int64_t>(std::max(s.start_ns, p.start_ns));
      if (overlap > best_overlap) best = &p, best_overlap = overlap;
    }
    if (!best) continue;
    s.start_ns = std::clamp(s.start_ns, best->start_ns, best->end_ns);
    s.end_ns = std::clamp(s.end_ns, s.start_ns, best->end_ns);
  }
  sort_by_start(sorted);

  const uint64_t t0 = sorted.empty() ? 0 : sorted.front().start_ns;
  std::map<std::string, int> tids;
  std::vector<std::string> lanes;
  for (const auto& s : sorted)
    if (tids.emplace(s.lane, static_cast<int>(lanes.size()) + 1).second) lanes.push_back(s.lane);

  std::vector<std::string> events;
  events.push_back(R"({"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": )" +
                   json_string(process_name) + "}}");
  for (const auto& lane : lanes) {
    const std::string tid = std::to_string(tids[lane]);
    events.push_back(R"({"name": "thread_name", "ph": "M", "pid": 1, "tid": )" + tid +
                     R"(, "args": {"name": )" + json_string(lane) + "}}");
    events.push_back(R"({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": )" + tid +
                     R"(, "args": {"sort_index": )" + tid + "}}");
  }
  for (const auto& s : sorted) {
    const double ts = static_cast<double>(s.start_ns - t0) / 1000.0;
    const double dur =
        static_cast<double>(s.end_ns >= s.start_ns ? s.end_ns - s.start_ns : 0) / 1000.0;
    events.push_back("{\"name\": " + json_string(s.name) + ", \"cat\": " + json_string(s.kind) +
                     R"(, "ph": "X", "ts": )" + micros(ts) + ", \"dur\": " + micros(dur) +
                     R"(, "pid": 1, "tid": )" + std::to_string(tids[s.lane]) +
                     R"(, "args": {"kind": )" + json_string(s.kind) +
                     ", \"lane\": " + json_string(s.lane) +
                     (s.detail.empty() ? "" : ", \"detail\": " + json_string(s.detail)) + "}}");
  }
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i)
    out += events[i] + (i + 1 < events.size() ? ",\n" : "\n");
  return out + "]}\n";
}

}  // namespace quilt
