// String tensors' ops: their schemas and the host kernels the core runs them with
// (core/host_ops.hpp says why they do not go to a backend). Cast to and from string,
// StringNormalizer, StringConcat, StringSplit, RegexFullMatch, Identity and Gather on strings, and
// ai.onnx.ml's CategoryMapper, LabelEncoder with string keys or values and OneHotEncoder on
// strings (LabelEncoder's and OneHotEncoder's schemas are in ml.cpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <string_view>
#include <unordered_map>

#include "core/checked.hpp"
#include "core/element.hpp"
#include "core/host_ops.hpp"

namespace quilt {

void register_string_schemas(SchemaRegistry& r);

namespace {

const char* const kMl = "ai.onnx.ml";

// ---- numeric elements as long double (exact for every int64 and uint64 up to 2^64) ----

long double read_number(const Tensor& t, int64_t i) {
  if (const std::optional<long double> v = element_value(t, i)) return *v;
  throw Error(ErrorCode::NotImplemented,
              std::string("reading ") + dtype_name(t.dtype()) + " elements as numbers");
}

template <class T>
T to_int(long double v) {
  if (std::isnan(v)) return 0;
  const long double lo = static_cast<long double>(std::numeric_limits<T>::min());
  const long double hi = static_cast<long double>(std::numeric_limits<T>::max());
  return static_cast<T>(std::clamp(std::trunc(v), lo, hi));
}

void write_number(Tensor& t, int64_t i, long double v) {
  void* p = t.raw_data();
  switch (t.dtype()) {
    case DType::Float32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      return;
    case DType::Float64:
      static_cast<double*>(p)[i] = static_cast<double>(v);
      return;
    case DType::Float16:
      static_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(v));
      return;
    case DType::BFloat16:
      static_cast<uint16_t*>(p)[i] = float_to_bfloat16(static_cast<float>(v));
      return;
    case DType::Int8:
      static_cast<int8_t*>(p)[i] = to_int<int8_t>(v);
      return;
    case DType::Int16:
      static_cast<int16_t*>(p)[i] = to_int<int16_t>(v);
      return;
    case DType::Int32:
      static_cast<int32_t*>(p)[i] = to_int<int32_t>(v);
      return;
    case DType::Int64:
      static_cast<int64_t*>(p)[i] = to_int<int64_t>(v);
      return;
    case DType::UInt8:
      static_cast<uint8_t*>(p)[i] = to_int<uint8_t>(v);
      return;
    case DType::UInt16:
      static_cast<uint16_t*>(p)[i] = to_int<uint16_t>(v);
      return;
    case DType::UInt32:
      static_cast<uint32_t*>(p)[i] = to_int<uint32_t>(v);
      return;
    case DType::UInt64:
      static_cast<uint64_t*>(p)[i] = to_int<uint64_t>(v);
      return;
    case DType::Bool:
      static_cast<uint8_t*>(p)[i] = v != 0;
      return;
    default:
      throw Error(ErrorCode::NotImplemented,
                  std::string("writing numbers as ") + dtype_name(t.dtype()) + " elements");
  }
}

// ---- Cast ----

// A float as onnxruntime writes it: 8 significant digits ("%.8g": "1", "0.1", "9.9999997e-06"),
// "NaN", "INF" and "-INF".
std::string float_text(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v < 0 ? "-INF" : "INF";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.8g", v);
  return buf;
}

std::string number_text(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Float32:
      return float_text(t.data<float>()[i]);
    case DType::Float64:
      return float_text(t.data<double>()[i]);
    case DType::Float16:
    case DType::BFloat16:
      return float_text(static_cast<double>(read_number(t, i)));
    case DType::UInt64:
      return std::to_string(t.data<uint64_t>()[i]);
    default:
      if (is_float8(t.dtype())) break;
      return std::to_string(static_cast<int64_t>(read_number(t, i)));
  }
  throw Error(ErrorCode::NotImplemented,
              std::string("Cast from ") + dtype_name(t.dtype()) + " to string is not supported");
}

long double parse_number(const Node& node, const std::string& s, DType to) {
  char* end = nullptr;
  const long double v = std::strtold(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0')
    node.fail("cannot cast the string '" + s + "' to " + dtype_name(to) + ": it is not a number",
              ErrorCode::InvalidArgument);
  return v;
}

std::vector<Tensor> cast_kernel(const Node& node, const std::vector<Tensor>& in) {
  const Tensor& x = in.at(0);
  const auto to = static_cast<DType>(node.attr_int("to", 0));
  Tensor y(to, x.shape());
  if (to == DType::String) {
    auto* out = y.data<std::string>();
    if (x.dtype() == DType::String)
      std::copy(x.data<std::string>(), x.data<std::string>() + x.numel(), out);
    else
      for (int64_t i = 0; i < x.numel(); ++i) out[i] = number_text(x, i);
    return {y};
  }
  if (is_float8(to))
    node.fail(std::string("Cast from string to ") + dtype_name(to) + " is not supported",
              ErrorCode::NotImplemented);
  const auto* strings = x.data<std::string>();
  for (int64_t i = 0; i < x.numel(); ++i) write_number(y, i, parse_number(node, strings[i], to));
  return {y};
}

// ---- StringNormalizer ----

void infer_string_normalizer(InferenceContext& ctx) {
  if (ctx.input_dtype(0) != DType::Undefined && ctx.input_dtype(0) != DType::String)
    ctx.fail(std::string("X is ") + dtype_name(ctx.input_dtype(0)) + ", expected string");
  const auto& x = ctx.input_shape(0);
  if (x.empty() || x.size() > 2 || (x.size() == 2 && x[0] != 1 && x[0] >= 0))
    ctx.fail("X has shape " + to_string(x) + ", expected [C] or [1, C]");
  const std::string action = ctx.node().attr_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    ctx.fail("attribute 'case_change_action' is '" + action + "', expected NONE, LOWER or UPPER");
  if (ctx.node().attr_strings("stopwords").empty()) {
    ctx.set_output(0, DType::String, x);
    return;
  }
  std::vector<int64_t> dims = x;
  dims.back() = -1;  // stop words removed: known at run time
  ctx.set_output(0, DType::String, dims);
}

std::string change_case(std::string s, const std::string& action) {
  if (action == "LOWER")
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  else if (action == "UPPER")
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

// A StringNormalizer's attributes, read once per node (make_host_kernel).
struct NormalizerAttrs {
  std::string action;
  bool sensitive = false;
  std::set<std::string> stop;  // lower case unless case-sensitive
};

NormalizerAttrs normalizer_attrs(const Node& node) {
  NormalizerAttrs a;
  a.action = node.attr_string("case_change_action", "NONE");
  a.sensitive = node.attr_int("is_case_sensitive", 0) != 0;
  for (const auto& w : node.attr_strings("stopwords"))
    a.stop.insert(a.sensitive ? w : change_case(w, "LOWER"));
  return a;
}

std::vector<Tensor> normalize_strings(const NormalizerAttrs& a, const Tensor& x) {
  std::vector<std::string> kept;
  const auto* xs = x.data<std::string>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (!a.stop.empty() && a.stop.count(a.sensitive ? xs[i] : change_case(xs[i], "LOWER")))
      continue;
    kept.push_back(change_case(xs[i], a.action));
  }
  // Everything filtered out: one empty string, as the spec says.
  if (kept.empty()) kept.emplace_back();
  const auto c = static_cast<int64_t>(kept.size());
  return {Tensor::from_strings(x.rank() == 2 ? std::vector<int64_t>{1, c} : std::vector{c}, kept)};
}

// ---- StringConcat, RegexFullMatch, StringSplit ----

void require_strings(const InferenceContext& ctx, size_t i, const char* name) {
  const DType d = ctx.input_dtype(i);
  if (d != DType::Undefined && d != DType::String)
    ctx.fail(std::string(name) + " is " + dtype_name(d) + ", expected string");
}

void infer_string_concat(InferenceContext& ctx) {
  require_strings(ctx, 0, "X");
  require_strings(ctx, 1, "Y");
  ctx.set_output(0, DType::String, broadcast_shapes(ctx, ctx.input_shape(0), ctx.input_shape(1)));
}

// Index into `in` (of shape in_dims, broadcast to out) of output element o.
int64_t broadcast_index(int64_t o, const std::vector<int64_t>& out,
                        const std::vector<int64_t>& in_dims) {
  int64_t index = 0, stride = 1;
  const size_t lead = out.size() - in_dims.size();
  for (size_t d = out.size(); d-- > 0;) {
    const int64_t coord = o % out[d];
    o /= out[d];
    if (d < lead) continue;
    const int64_t n = in_dims[d - lead];
    if (n != 1) index += coord * stride;
    stride *= n;
  }
  return index;
}

// Z[o] = f(X[..], Y[..]) over the broadcast shape of two string tensors, Z of dtype `out`.
template <class F>
Tensor broadcast_strings(const Node& node, const Tensor& x, const Tensor& y, DType out_dtype, F f) {
  const auto& xd = x.shape();
  const auto& yd = y.shape();
  std::vector<int64_t> out(std::max(xd.size(), yd.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t a = k + xd.size() >= out.size() ? xd[k + xd.size() - out.size()] : 1;
    const int64_t b = k + yd.size() >= out.size() ? yd[k + yd.size() - out.size()] : 1;
    if (a != b && a != 1 && b != 1)
      node.fail("inputs of shapes " + to_string(xd) + " and " + to_string(yd) + " do not broadcast",
                ErrorCode::InvalidArgument);
    out[k] = a == 1 ? b : a;
  }
  Tensor z(out_dtype, out);
  const std::string* xs = x.data<std::string>();
  const std::string* ys = y.data<std::string>();
  for (int64_t o = 0; o < z.numel(); ++o)
    f(z, o, xs[broadcast_index(o, out, xd)], ys[broadcast_index(o, out, yd)]);
  return z;
}

std::vector<Tensor> string_concat_kernel(const Node& node, const std::vector<Tensor>& in) {
  return {broadcast_strings(node, in.at(0), in.at(1), DType::String,
                            [](Tensor& z, int64_t o, const std::string& a, const std::string& b) {
                              z.data<std::string>()[o] = a + b;
                            })};
}

std::vector<Tensor> equal_kernel(const Node& node, const std::vector<Tensor>& in) {
  if (in.at(0).dtype() != DType::String || in.at(1).dtype() != DType::String)
    node.fail("both inputs must be strings to compare strings", ErrorCode::InvalidArgument);
  return {broadcast_strings(node, in.at(0), in.at(1), DType::Bool,
                            [](Tensor& z, int64_t o, const std::string& a, const std::string& b) {
                              z.data<bool>()[o] = a == b;
                            })};
}

// An ECMAScript regular expression compiled once per process and kept by its text: the host
// kernels get only the node, and compiling at every run was most of a TF-IDF pipeline's time.
// Throws std::regex_error when it does not compile (nothing is kept then). At most 256 kept.
std::shared_ptr<const std::regex> compiled_regex(const std::string& expression) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const std::regex>> kept;
  {
    std::lock_guard lock(mutex);
    if (auto it = kept.find(expression); it != kept.end()) return it->second;
  }
  auto re = std::make_shared<const std::regex>(expression, std::regex::ECMAScript);
  std::lock_guard lock(mutex);
  if (kept.size() >= 256) kept.clear();
  return kept.emplace(expression, std::move(re)).first->second;
}

// The pattern of a RegexFullMatch node.
std::shared_ptr<const std::regex> compile_pattern(const Node& node) {
  if (!node.has_attr("pattern")) node.fail("attribute 'pattern' is required");
  const std::string pattern = node.attr_string("pattern", "");
  try {
    return compiled_regex(pattern);
  } catch (const std::regex_error& e) {
    node.fail("attribute 'pattern' '" + pattern +
              "' is not a valid regular expression: " + e.what());
  }
}

void infer_regex_full_match(InferenceContext& ctx) {
  require_strings(ctx, 0, "X");
  if (!ctx.runtime()) compile_pattern(ctx.node());
  ctx.set_output(0, DType::Bool, ctx.input_shape(0));
}

std::vector<Tensor> full_match(const std::regex& re, const Tensor& x) {
  Tensor y(DType::Bool, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i)
    y.data<bool>()[i] = std::regex_match(x.data<std::string>()[i], re);
  return {y};
}

void infer_string_split(InferenceContext& ctx) {
  require_strings(ctx, 0, "X");
  std::vector<int64_t> dims = ctx.input_shape(0);
  ctx.set_output(1, DType::Int64, dims);
  dims.push_back(-1);  // the most substrings of any element: known at run time
  ctx.set_output(0, DType::String, dims);
}

// Like Python's str.split() as onnxruntime does it: on `delimiter`, or on runs of whitespace
// when it is empty, at most maxsplit times when maxsplit >= 0; an empty string has no pieces.
std::vector<std::string> split(const std::string& s, const std::string& delimiter,
                               int64_t maxsplit) {
  std::vector<std::string> parts;
  if (delimiter.empty()) {
    size_t i = 0;
    auto space = [&](size_t k) { return std::isspace(static_cast<unsigned char>(s[k])) != 0; };
    while (i < s.size()) {
      while (i < s.size() && space(i)) ++i;
      if (i == s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t end = s.size();  // the rest, without trailing whitespace (as onnxruntime)
        while (end > i && space(end - 1)) --end;
        parts.push_back(s.substr(i, end - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !space(j)) ++j;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  if (s.empty()) return parts;  // no substrings at all (onnxruntime), not one empty one
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(delimiter, start);
    if (at == std::string::npos ||
        (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, at - start));
    start = at + delimiter.size();
  }
}

std::vector<Tensor> string_split_kernel(const Node& node, const std::vector<Tensor>& in) {
  const Tensor& x = in.at(0);
  const std::string delimiter = node.attr_string("delimiter", "");
  const int64_t maxsplit = node.attr_int("maxsplit", -1);
  std::vector<std::vector<std::string>> parts(static_cast<size_t>(x.numel()));
  int64_t widest = 0;
  Tensor counts(DType::Int64, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    parts[i] = split(x.data<std::string>()[i], delimiter, maxsplit);
    counts.data<int64_t>()[i] = static_cast<int64_t>(parts[i].size());
    widest = std::max(widest, counts.data<int64_t>()[i]);
  }
  std::vector<int64_t> dims = x.shape();
  dims.push_back(widest);
  Tensor y(DType::String, dims);
  for (int64_t i = 0; i < x.numel(); ++i)
    for (size_t k = 0; k < parts[i].size(); ++k)
      y.data<std::string>()[i * widest + static_cast<int64_t>(k)] = std::move(parts[i][k]);
  return {y, counts};
}

// ---- Reshape and Flatten of strings, com.microsoft's Tokenizer (skl2onnx's text pipelines) ----

std::vector<Tensor> reshape_kernel(const Node& node, const std::vector<Tensor>& in) {
  const Tensor& x = in.at(0);
  std::vector<int64_t> want;
  if (node.opset < 5) {
    want = node.attr_ints("shape");
  } else {
    const Tensor& shape = in.at(1);
    if (shape.dtype() != DType::Int64 || shape.shape().size() != 1)
      node.fail("input 'shape' must be a 1-D int64 tensor", ErrorCode::InvalidArgument);
    want.assign(shape.data<int64_t>(), shape.data<int64_t>() + shape.numel());
  }
  const bool allowzero = node.opset >= 14 && node.attr_int("allowzero", 0) != 0;
  int64_t known = 1;
  int unknown = -1;
  for (size_t d = 0; d < want.size(); ++d) {
    if (want[d] == 0 && !allowzero) {
      if (d >= x.shape().size())
        node.fail("shape " + to_string(want) + " copies dim " + std::to_string(d) +
                      " of an input of rank " + std::to_string(x.shape().size()),
                  ErrorCode::InvalidArgument);
      want[d] = x.shape()[d];
    }
    if (want[d] == -1 && unknown < 0)
      unknown = static_cast<int>(d);
    else if (want[d] < 0)
      node.fail("shape " + to_string(want) + " has more than one -1 or a negative dim",
                ErrorCode::InvalidArgument);
    else
      known *= want[d];
  }
  if (unknown >= 0 && known > 0 && x.numel() % known == 0) want[unknown] = x.numel() / known;
  int64_t count = 1;
  for (int64_t d : want) count *= d;
  if (count != x.numel())
    node.fail("cannot reshape " + to_string(x.shape()) + " (" + std::to_string(x.numel()) +
                  " strings) to " + to_string(want),
              ErrorCode::InvalidArgument);
  return {x.reshaped(want)};
}

std::vector<Tensor> flatten_kernel(const Node& node, const std::vector<Tensor>& in) {
  const Tensor& x = in.at(0);
  const auto rank = static_cast<int64_t>(x.shape().size());
  int64_t axis = node.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis && d < rank; ++d) outer *= x.shape()[d];
  return {x.reshaped({outer, outer ? x.numel() / outer : 0})};
}

// Gather on strings (skl2onnx takes a categorical pipeline's columns out of its string input with
// it): data's elements along `axis` picked by indices (int32 or int64, negative from the end).
std::vector<Tensor> gather_kernel(const Node& node, const std::vector<Tensor>& in) {
  const Tensor& data = in.at(0);
  const Tensor& indices = in.at(1);
  const auto rank = static_cast<int64_t>(data.shape().size());
  if (rank == 0) node.fail("data is a scalar; Gather needs rank >= 1", ErrorCode::InvalidArgument);
  int64_t axis = node.attr_int("axis", 0);
  if (axis < -rank || axis >= rank)
    node.fail("axis " + std::to_string(axis) + " is out of range for data of rank " +
                  std::to_string(rank),
              ErrorCode::InvalidArgument);
  if (axis < 0) axis += rank;
  if (indices.dtype() != DType::Int64 && indices.dtype() != DType::Int32)
    node.fail(std::string("indices must be int32 or int64, got ") + dtype_name(indices.dtype()),
              ErrorCode::InvalidArgument);
  const int64_t size = data.shape()[static_cast<size_t>(axis)];
  std::vector<int64_t> picks(static_cast<size_t>(indices.numel()));
  for (int64_t i = 0; i < indices.numel(); ++i)
    picks[static_cast<size_t>(i)] = checked_index(
        node,
        indices.dtype() == DType::Int64 ? indices.data<int64_t>()[i] : indices.data<int32_t>()[i],
        size);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape()[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= data.shape()[static_cast<size_t>(d)];
  std::vector<int64_t> dims(data.shape().begin(), data.shape().begin() + axis);
  dims.insert(dims.end(), indices.shape().begin(), indices.shape().end());
  dims.insert(dims.end(), data.shape().begin() + axis + 1, data.shape().end());
  Tensor y(DType::String, dims);
  const std::string* src = data.data<std::string>();
  std::string* dst = y.data<std::string>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p : picks) {
      std::copy_n(src + (o * size + p) * inner, inner, dst);
      dst += inner;
    }
  return {y};
}

// com.microsoft Tokenizer, as onnxruntime's contrib kernel: each string's tokens are the matches
// of `tokenexp`, or the pieces between matches of any of `separators` (an empty separator: each
// UTF-8 character a token); tokens of fewer than `mincharnum` characters are dropped; `mark`
// adds a start (0x02) and an end (0x03) token. The output adds a last dim of the most tokens of
// any string, shorter rows padded with `pad_value` (0 when every string is empty).
struct TokenizerAttrs {
  bool mark = false;
  int64_t mincharnum = 1;
  std::string pad;
  bool by_char = false;
  bool by_match = false;                      // tokenexp: the matches are the tokens
  std::shared_ptr<const std::regex> pattern;  // compiled_regex's
  // When tokenexp is one character class repeated ("[a-zA-Z0-9_]+", skl2onnx's, or "\w+"),
  // its bytes: the tokens are then the maximal runs of them, found without the regex (which was
  // a fifth of a TF-IDF pipeline's run).
  std::optional<std::array<bool, 256>> run_of;
};

// Adds the bytes of ECMAScript class escape c (\w, \d, \s or a negation) to `in`, as
// std::regex matches them on char strings in its default (classic "C") locale; false when c is
// not one of those six.
bool class_escape(char c, std::array<bool, 256>& in) {
  bool (*test)(int) = nullptr;
  switch (c) {
    case 'w':
    case 'W':
      test = +[](int b) {
        return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') ||
               b == '_';
      };
      break;
    case 'd':
    case 'D':
      test = +[](int b) { return b >= '0' && b <= '9'; };
      break;
    case 's':
    case 'S':
      test = +[](int b) {
        return b == ' ' || b == '\t' || b == '\n' || b == '\v' || b == '\f' || b == '\r';
      };
      break;
    default:
      return false;
  }
  const bool negated = c == 'W' || c == 'D' || c == 'S';
  for (int b = 0; b < 256; ++b)
    if (test(b) != negated) in[static_cast<size_t>(b)] = true;
  return true;
}

// The bytes of `expression` when it is one character class (a bracket expression of single
// characters, ranges and class escapes, or a class escape alone) followed by '+'; else none
// (the regex then does the work).
std::optional<std::array<bool, 256>> character_run(const std::string& expression) {
  std::array<bool, 256> in{};
  const size_t n = expression.size();
  if (n == 3 && expression[0] == '\\' && expression[2] == '+') {
    if (!class_escape(expression[1], in)) return std::nullopt;
    return in;
  }
  if (n < 4 || expression[0] != '[' || expression.substr(n - 2) != "]+") return std::nullopt;
  size_t i = 1;
  const size_t end = n - 2;  // the closing ']'
  const bool negated = expression[i] == '^';
  if (negated) ++i;
  if (i == end) return std::nullopt;  // "[]" and "[^]": leave them to the regex
  // One literal at i (an escaped character, or any but '\\', '[' and ']'); advances i.
  auto literal = [&](int& out) {
    if (i >= end) return false;
    char c = expression[i];
    if (c == '[' || c == ']') return false;
    if (c == '\\') {
      if (i + 1 >= end) return false;
      c = expression[i + 1];
      if (std::isalnum(static_cast<unsigned char>(c))) return false;  // \w, \b, \n, \u...
      i += 2;
    } else {
      ++i;
    }
    out = static_cast<unsigned char>(c);
    return true;
  };
  while (i < end) {
    if (expression[i] == '\\' && i + 1 < end &&
        std::isalpha(static_cast<unsigned char>(expression[i + 1]))) {
      if (!class_escape(expression[i + 1], in)) return std::nullopt;
      i += 2;
      continue;
    }
    int lo = 0;
    if (!literal(lo)) return std::nullopt;
    if (i + 1 < end && expression[i] == '-') {  // a range lo-hi
      ++i;
      int hi = 0;
      if (!literal(hi) || hi < lo) return std::nullopt;
      for (int b = lo; b <= hi; ++b) in[static_cast<size_t>(b)] = true;
    } else {
      in[static_cast<size_t>(lo)] = true;
    }
  }
  if (negated)
    for (bool& b : in) b = !b;
  return in;
}

TokenizerAttrs tokenizer_attrs(const Node& node) {
  TokenizerAttrs a;
  a.mark = node.attr_int("mark", 0) != 0;
  a.mincharnum = node.attr_int("mincharnum", 1);
  if (a.mincharnum < 1)
    node.fail("attribute 'mincharnum' is " + std::to_string(a.mincharnum) + ", expected >= 1");
  if (!node.has_attr("pad_value")) node.fail("attribute 'pad_value' is required");
  a.pad = node.attr_string("pad_value", "");
  std::string expression = node.attr_string("tokenexp", "");
  const std::vector<std::string> separators = node.attr_strings("separators");
  if (!expression.empty() && !separators.empty())
    node.fail("attributes 'tokenexp' and 'separators' are both set; expected one of them");
  if (expression.empty() && separators.empty())
    node.fail("one of the attributes 'tokenexp' and 'separators' is required");
  a.by_match = !expression.empty();
  if (!a.by_match) {
    a.by_char = separators.size() == 1 && separators[0].empty();
    for (const std::string& sep : separators) {
      if (sep.empty() && !a.by_char)
        node.fail("attribute 'separators' holds an empty separator among others");
      expression += (expression.empty() ? "" : "|") + ("(?:" + sep + ")");
    }
  }
  if (expression.rfind("(?u)", 0) == 0) expression.erase(0, 4);  // RE2's UTF-8 flag: the default
  if (!a.by_char) {
    try {
      a.pattern = compiled_regex(expression);
    } catch (const std::regex_error& e) {
      node.fail("the tokenizer's expression '" + expression +
                "' is not a valid regular expression: " + e.what());
    }
    if (a.by_match) a.run_of = character_run(expression);
  }
  return a;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

void infer_tokenizer(InferenceContext& ctx) {
  require_strings(ctx, 0, "X");
  if (!ctx.runtime()) tokenizer_attrs(ctx.node());
  std::vector<int64_t> dims = ctx.input_shape(0);
  if (dims.size() > 2) ctx.fail("X has shape " + to_string(dims) + ", expected [C] or [N, C]");
  dims.push_back(-1);  // the most tokens of any string: known at run time
  ctx.set_output(0, DType::String, dims);
}

std::vector<Tensor> tokenize(const Node& node, const TokenizerAttrs& a, const Tensor& x) {
  if (x.shape().size() > 2)
    node.fail("X has shape " + to_string(x.shape()) + ", expected [C] or [N, C]",
              ErrorCode::InvalidArgument);
  std::vector<std::vector<std::string>> rows(static_cast<size_t>(x.numel()));
  size_t widest = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::string& s = x.data<std::string>()[i];
    std::vector<std::string>& tokens = rows[i];
    if (a.mark) tokens.emplace_back("\x02");
    auto keep = [&](std::string t) {
      if (!t.empty() && utf8_length(t) >= static_cast<size_t>(a.mincharnum))
        tokens.push_back(std::move(t));
    };
    if (a.by_char) {
      for (size_t k = 0; k < s.size();) {
        size_t len = 1;
        while (k + len < s.size() && (static_cast<unsigned char>(s[k + len]) & 0xC0) == 0x80) ++len;
        keep(s.substr(k, len));
        k += len;
      }
    } else if (a.run_of) {
      const std::array<bool, 256>& in = *a.run_of;
      for (size_t k = 0; k < s.size();) {
        while (k < s.size() && !in[static_cast<unsigned char>(s[k])]) ++k;
        const size_t first = k;
        while (k < s.size() && in[static_cast<unsigned char>(s[k])]) ++k;
        if (k > first) keep(s.substr(first, k - first));
      }
    } else {
      size_t last = 0;
      for (auto m = std::sregex_iterator(s.begin(), s.end(), *a.pattern);
           m != std::sregex_iterator(); ++m) {
        if (m->length(0) == 0) continue;
        if (a.by_match) {
          keep(m->str(0));
        } else {
          keep(s.substr(last, static_cast<size_t>(m->position(0)) - last));
          last = static_cast<size_t>(m->position(0) + m->length(0));
        }
      }
      if (!a.by_match) keep(s.substr(last));
    }
    if (a.mark) tokens.emplace_back("\x03");
    widest = std::max(widest, tokens.size());
  }
  // Only empty strings: no tokens at all, not even the marks (onnxruntime's behaviour).
  const std::string* xs = x.data<std::string>();
  if (std::all_of(xs, xs + x.numel(), [](const std::string& s) { return s.empty(); })) widest = 0;
  std::vector<int64_t> dims = x.shape();
  dims.push_back(static_cast<int64_t>(widest));
  Tensor y(DType::String, dims);
  std::string* out = y.data<std::string>();
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t k = 0; k < widest; ++k)
      out[i * widest + k] = k < rows[i].size() ? std::move(rows[i][k]) : a.pad;
  return {y};
}

// ---- CategoryMapper, LabelEncoder ----

void infer_category_mapper(InferenceContext& ctx) {
  const Node& n = ctx.node();
  const auto ints = n.attr_ints("cats_int64s");
  const auto strings = n.attr_strings("cats_strings");
  if (ints.size() != strings.size())
    ctx.fail("attributes 'cats_int64s' (" + std::to_string(ints.size()) + " entries) and " +
             "'cats_strings' (" + std::to_string(strings.size()) + ") must have the same length");
  const DType d = ctx.input_dtype(0);
  if (d == DType::String)
    ctx.set_output(0, DType::Int64, ctx.input_shape(0));
  else if (d == DType::Int64)
    ctx.set_output(0, DType::String, ctx.input_shape(0));
  else if (d != DType::Undefined)
    ctx.fail(std::string("X is ") + dtype_name(d) + ", expected string or int64");
}

// A CategoryMapper's two lookups (string -> int64 and back), built once per node
// (make_host_kernel): building them on every run was most of a small pipeline's run.
struct CategoryTable {
  std::unordered_map<std::string, int64_t> to_int;
  std::unordered_map<int64_t, std::string> to_string;
  int64_t default_int = -1;
  std::string default_string;
};

CategoryTable category_table(const Node& node) {
  const auto ints = node.attr_ints("cats_int64s");
  const auto strings = node.attr_strings("cats_strings");
  if (ints.size() != strings.size())  // shape inference says so first; a run checks again
    node.fail("attributes 'cats_int64s' and 'cats_strings' must have the same length");
  CategoryTable t;
  for (size_t i = 0; i < strings.size(); ++i) t.to_int.emplace(strings[i], ints[i]);
  for (size_t i = 0; i < ints.size(); ++i) t.to_string.emplace(ints[i], strings[i]);
  t.default_int = node.attr_int("default_int64", -1);
  t.default_string = node.attr_string("default_string", "_Unused");
  return t;
}

std::vector<Tensor> map_categories(const CategoryTable& t, const Tensor& x) {
  if (x.dtype() == DType::String) {
    Tensor y(DType::Int64, x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) {
      auto it = t.to_int.find(x.data<std::string>()[i]);
      y.data<int64_t>()[i] = it == t.to_int.end() ? t.default_int : it->second;
    }
    return {y};
  }
  Tensor y(DType::String, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto it = t.to_string.find(x.data<int64_t>()[i]);
    y.data<std::string>()[i] = it == t.to_string.end() ? t.default_string : it->second;
  }
  return {y};
}

// OneHotEncoder on strings: each element of X becomes a row of cats_strings' length with a one
// at its category's index; an unknown string gives a row of zeros, or fails when zeros is 0.
// Its categories' indices, built once per node (make_host_kernel).
struct OneHotTable {
  std::unordered_map<std::string, int64_t> index;
  int64_t width = 0;
  bool zeros = true;
};

OneHotTable one_hot_table(const Node& node) {
  OneHotTable t;
  const auto cats = node.attr_strings("cats_strings");
  for (size_t i = 0; i < cats.size(); ++i) t.index.emplace(cats[i], static_cast<int64_t>(i));
  t.width = static_cast<int64_t>(cats.size());
  t.zeros = node.attr_int("zeros", 1) != 0;
  return t;
}

std::vector<Tensor> one_hot_encode(const Node& node, const OneHotTable& t, const Tensor& x) {
  const auto& index = t.index;
  const bool zeros = t.zeros;
  const int64_t width = t.width;
  std::vector<int64_t> dims = x.shape();
  dims.push_back(width);
  Tensor y(DType::Float32, dims);  // zero-filled
  float* out = y.data<float>();
  const std::string* xs = x.data<std::string>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const auto it = index.find(xs[i]);
    if (it != index.end())
      out[i * width + it->second] = 1.0f;
    else if (!zeros)
      node.fail("X has category '" + xs[i] + "', which is not in cats_strings (and zeros is 0)",
                ErrorCode::InvalidArgument);
  }
  return {y};
}

// A LabelEncoder's keys, values or default, whatever attribute holds them, as a tensor.
Tensor label_encoder_list(const Node& n, const std::string& what) {
  if (const Tensor* t = n.has_attr(what + "_tensor") ? n.attr_tensor(what + "_tensor") : nullptr)
    return t->reshaped({t->numel()});
  if (n.has_attr(what + "_strings")) {
    auto v = n.attr_strings(what + "_strings");
    return Tensor::from_strings({static_cast<int64_t>(v.size())}, v);
  }
  if (n.has_attr(what + "_int64s")) {
    auto v = n.attr_ints(what + "_int64s");
    return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
  }
  auto v = n.attr_floats(what + "_floats");
  return Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v);
}

// The default output of a LabelEncoder whose values have dtype `d`.
Tensor label_encoder_default(const Node& n, DType d) {
  if (const Tensor* t = n.has_attr("default_tensor") ? n.attr_tensor("default_tensor") : nullptr)
    return t->reshaped({1});
  if (d == DType::String)
    return Tensor::from_strings({1}, {n.attr_string("default_string", "_Unused")});
  Tensor t(d, {1});
  if (d == DType::Float32)
    write_number(t, 0, n.attr_float("default_float", -0.0f));
  else
    write_number(t, 0, static_cast<long double>(n.attr_int("default_int64", -1)));
  return t;
}

// A LabelEncoder's keys, values and default with the keys' index, built once per node
// (make_host_kernel): a TF-IDF pipeline's word encoder rebuilt its vocabulary's map on every run.
struct LabelTable {
  Tensor keys, values, fallback;
  std::unordered_map<std::string_view, int64_t> by_string;  // views of keys' strings
  std::map<long double, int64_t> by_number;
  int64_t nan_key = -1;  // the key that NaN matches, if any
};

// The node's table for inputs of dtype x_dtype: opset 1's classes_strings maps either way, by
// the input's dtype; the other forms do not depend on it.
std::shared_ptr<const LabelTable> label_table(const Node& node, DType x_dtype) {
  auto t = std::make_shared<LabelTable>();
  t->keys = label_encoder_list(node, "keys");
  t->values = label_encoder_list(node, "values");
  t->fallback = label_encoder_default(node, t->values.dtype());
  if (node.has_attr("classes_strings")) {  // opset 1: a string <-> its index in the list
    const auto classes = node.attr_strings("classes_strings");
    const auto n = static_cast<int64_t>(classes.size());
    std::vector<int64_t> index(classes.size());
    for (int64_t i = 0; i < n; ++i) index[static_cast<size_t>(i)] = i;
    Tensor names = Tensor::from_strings({n}, classes);
    Tensor ids = Tensor::from_vector<int64_t>({n}, index);
    const bool to_int = x_dtype == DType::String;
    t->keys = to_int ? names : ids;
    t->values = to_int ? ids : names;
    t->fallback = label_encoder_default(node, t->values.dtype());
  }
  if (t->keys.numel() != t->values.numel())
    node.fail("the node has " + std::to_string(t->keys.numel()) + " keys but " +
              std::to_string(t->values.numel()) + " values");
  if (t->keys.dtype() == DType::String) {
    const std::string* keys = t->keys.data<std::string>();
    for (int64_t k = 0; k < t->keys.numel(); ++k) t->by_string.emplace(keys[k], k);
  } else {
    for (int64_t k = 0; k < t->keys.numel(); ++k) {
      const long double v = read_number(t->keys, k);
      if (std::isnan(v)) {
        // A NaN key matches NaN from opset 4 on; before, it matches nothing (onnxruntime).
        if (t->nan_key < 0 && node.opset >= 4) t->nan_key = k;
      } else {
        t->by_number.emplace(v, k);
      }
    }
  }
  return t;
}

std::vector<Tensor> label_encode(const Node& node, const LabelTable& t, const Tensor& x) {
  if ((t.keys.dtype() == DType::String) != (x.dtype() == DType::String))
    node.fail(std::string("X is ") + dtype_name(x.dtype()) + " but the keys are " +
                  dtype_name(t.keys.dtype()),
              ErrorCode::InvalidArgument);
  Tensor y(t.values.dtype(), x.shape());
  // Whole-byte elements of the same dtype are copied as bytes; the rest (a default of another
  // dtype, sub-byte types) go through numbers. Through numbers for every element, writing
  // int64 ids was a fifth of a TF-IDF pipeline's run.
  const size_t size = dtype_size(y.dtype());
  auto* bytes = static_cast<unsigned char*>(y.raw_data());
  for (int64_t i = 0; i < x.numel(); ++i) {
    // Where the element's value is: an index into values, or -1 for the default.
    int64_t where = -1;
    if (x.dtype() == DType::String) {
      if (auto it = t.by_string.find(x.data<std::string>()[i]); it != t.by_string.end())
        where = it->second;
    } else if (const long double v = read_number(x, i); std::isnan(v)) {
      where = t.nan_key;
    } else if (auto it = t.by_number.find(v); it != t.by_number.end()) {
      where = it->second;
    }
    const Tensor& from = where < 0 ? t.fallback : t.values;
    const int64_t k = where < 0 ? 0 : where;
    if (y.dtype() == DType::String)
      y.data<std::string>()[i] = from.data<std::string>()[k];
    else if (size > 0 && from.dtype() == y.dtype())
      std::memcpy(
          bytes + static_cast<size_t>(i) * size,
          static_cast<const unsigned char*>(from.raw_data()) + static_cast<size_t>(k) * size, size);
    else
      write_number(y, i, read_number(from, k));
  }
  return {y};
}

std::vector<Tensor> identity_kernel(const Node&, const std::vector<Tensor>& in) {
  return {in.at(0)};
}

// A string Constant (value_string, value_strings or a string tensor in value).
std::vector<Tensor> constant_kernel(const Node& node, const std::vector<Tensor>&) {
  if (const Tensor* t = node.has_attr("value") ? node.attr_tensor("value") : nullptr) return {*t};
  if (node.has_attr("value_strings")) {
    auto v = node.attr_strings("value_strings");
    return {Tensor::from_strings({static_cast<int64_t>(v.size())}, v)};
  }
  return {Tensor::from_strings({}, {node.attr_string("value_string", "")})};
}

// A kernel on string tensors as a kernel on values (each input a tensor or absent).
ValueKernel on_values(HostKernel fn) {
  return [fn = std::move(fn)](const Node& node, const std::vector<Value>& in) {
    std::vector<Tensor> tensors;
    for (size_t i = 0; i < in.size(); ++i)
      tensors.push_back(in[i].defined() ? tensor_input(node, in[i], i) : Tensor());
    std::vector<Tensor> out = fn(node, tensors);
    return std::vector<Value>(out.begin(), out.end());
  };
}

// The ops on string tensors with nothing to prepare.
using TensorFn = std::vector<Tensor> (*)(const Node&, const std::vector<Tensor>&);
template <TensorFn fn>
ValueKernel tensor_op(const Node&) {
  return on_values(fn);
}

// The ops whose attributes make a table, built once for the node.
ValueKernel prepare_label_encoder(const Node& node) {
  if (!node.has_attr("classes_strings")) {
    std::shared_ptr<const LabelTable> t = label_table(node, DType::Undefined);
    return on_values([t](const Node& n, const std::vector<Tensor>& in) {
      return label_encode(n, *t, in.at(0));
    });
  }
  // opset 1: the direction follows the input's dtype (strings to indices or back).
  std::shared_ptr<const LabelTable> to_index = label_table(node, DType::String);
  std::shared_ptr<const LabelTable> to_string = label_table(node, DType::Int64);
  return on_values([to_index, to_string](const Node& n, const std::vector<Tensor>& in) {
    const Tensor& x = in.at(0);
    return label_encode(n, x.dtype() == DType::String ? *to_index : *to_string, x);
  });
}

ValueKernel prepare_category_mapper(const Node& node) {
  auto t = std::make_shared<const CategoryTable>(category_table(node));
  return on_values(
      [t](const Node&, const std::vector<Tensor>& in) { return map_categories(*t, in.at(0)); });
}

ValueKernel prepare_one_hot_encoder(const Node& node) {
  auto t = std::make_shared<const OneHotTable>(one_hot_table(node));
  return on_values([t](const Node& n, const std::vector<Tensor>& in) {
    return one_hot_encode(n, *t, in.at(0));
  });
}

ValueKernel prepare_tokenizer(const Node& node) {
  auto a = std::make_shared<const TokenizerAttrs>(tokenizer_attrs(node));
  return on_values(
      [a](const Node& n, const std::vector<Tensor>& in) { return tokenize(n, *a, in.at(0)); });
}

ValueKernel prepare_string_normalizer(const Node& node) {
  auto a = std::make_shared<const NormalizerAttrs>(normalizer_attrs(node));
  return on_values(
      [a](const Node&, const std::vector<Tensor>& in) { return normalize_strings(*a, in.at(0)); });
}

ValueKernel prepare_regex_full_match(const Node& node) {
  std::shared_ptr<const std::regex> re = compile_pattern(node);
  return on_values(
      [re](const Node&, const std::vector<Tensor>& in) { return full_match(*re, in.at(0)); });
}

// Every host op: those on string tensors and those on sequences, maps and optionals
// (value_ops(), which win for an op in both, such as Identity).
const std::map<OpKey, HostPrepare>& host_ops() {
  static const auto ops = [] {
    std::map<OpKey, HostPrepare> all = {
        {{"", "Cast"}, tensor_op<cast_kernel>},
        {{"", "Identity"}, tensor_op<identity_kernel>},
        {{"", "Constant"}, tensor_op<constant_kernel>},
        {{"", "Equal"}, tensor_op<equal_kernel>},
        {{"", "StringNormalizer"}, prepare_string_normalizer},
        {{"", "StringConcat"}, tensor_op<string_concat_kernel>},
        {{"", "StringSplit"}, tensor_op<string_split_kernel>},
        {{"", "RegexFullMatch"}, prepare_regex_full_match},
        {{"", "Reshape"}, tensor_op<reshape_kernel>},
        {{"", "Flatten"}, tensor_op<flatten_kernel>},
        {{"", "Gather"}, tensor_op<gather_kernel>},
        {{"com.microsoft", "Tokenizer"}, prepare_tokenizer},
        {{kMl, "CategoryMapper"}, prepare_category_mapper},
        {{kMl, "OneHotEncoder"}, prepare_one_hot_encoder},
        {{kMl, "LabelEncoder"}, prepare_label_encoder},
    };
    for (const auto& [key, prepare] : value_ops()) all[key] = prepare;
    return all;
  }();
  return ops;
}

HostPrepare find_host_op(const Node& node) {
  auto it = host_ops().find({node.domain, node.op_type});
  if (it == host_ops().end()) {
    std::string ops;
    for (const auto& [key, _] : host_ops())
      ops += (ops.empty() ? "" : ", ") + (key.first.empty() ? "" : key.first + ".") + key.second;
    node.fail(
        "string tensors are not supported by " + node.op_type + " (ops on strings: " + ops + ")",
        ErrorCode::NotImplemented);
  }
  return it->second;
}

}  // namespace

std::string host_reason(const std::vector<TypeShape>& inputs,
                        const std::vector<TypeShape>& outputs) {
  for (const auto* types : {&inputs, &outputs})
    for (const TypeShape& t : *types)
      if (!t.is_tensor())
        return "sequences, maps and optionals do not cross the backend ABI: the core runs it";
  for (const auto* types : {&inputs, &outputs})
    for (const TypeShape& t : *types)
      if (t.dtype == DType::String)
        return "string tensors do not cross the backend ABI: the core runs it";
  return "";
}

bool has_host_kernel(const std::string& domain, const std::string& op_type) {
  return host_ops().count({domain, op_type}) != 0;
}

void require_host_kernel(const Node& node) {
  find_host_op(node);
}

ValueKernel make_host_kernel(const Node& node) {
  const HostPrepare prepare = find_host_op(node);
  try {
    return prepare(node);
  } catch (const Error& e) {
    return [e](const Node&, const std::vector<Value>&) -> std::vector<Value> { throw e; };
  }
}

void register_string_schemas(SchemaRegistry& r) {
  r.add({.op_type = "StringNormalizer", .min_opset = 10, .infer = infer_string_normalizer});
  r.add({.op_type = "StringConcat",
         .min_opset = 20,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_string_concat});
  r.add({.op_type = "RegexFullMatch", .min_opset = 20, .infer = infer_regex_full_match});
  r.add({.op_type = "StringSplit",
         .min_opset = 20,
         .min_outputs = 2,
         .max_outputs = 2,
         .infer = infer_string_split});
  r.add({.op_type = "CategoryMapper", .domain = kMl, .infer = infer_category_mapper});
  r.add({.op_type = "Tokenizer", .domain = "com.microsoft", .infer = infer_tokenizer});
}

}  // namespace quilt

namespace quilt {

// The names of a graph's values (node outputs, inputs, initializers), for fresh_name.
std::set<std::string> value_names(const Graph& graph) {
  std::set<std::string> names;
  for (const Node& n : graph.nodes)
    for (const auto& o : n.outputs) names.insert(o);
  for (const auto& in : graph.inputs) names.insert(in.name);
  for (const auto& [name, _] : graph.initializers) names.insert(name);
  return names;
}

// `base`, or base with underscores appended, not yet in `names`; added to it.
std::string fresh_name(std::set<std::string>& names, std::string base) {
  while (names.count(base)) base += "_";
  names.insert(base);
  return base;
}

Attribute ints_attribute(std::string name, std::vector<int64_t> ints) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(ints);
  return a;
}

Attribute strings_attribute(std::string name, std::vector<std::string> strings) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Attribute::Kind::Strings;
  a.strings = std::move(strings);
  return a;
}

// An ai.onnx.ml LabelEncoder (opset 2) the load-time rewrites insert: input -> output by
// `attributes` (keys_*, values_*, default_*), at node index `index`.
Node label_encoder(std::string name, std::string input, std::string output, size_t index,
                   std::vector<Attribute> attributes) {
  Node encoder;
  encoder.name = std::move(name);
  encoder.op_type = "LabelEncoder";
  encoder.domain = kMl;
  encoder.opset = 2;
  encoder.inputs = {std::move(input)};
  encoder.outputs = {std::move(output)};
  encoder.index = index;
  for (Attribute& a : attributes) encoder.attributes[a.name] = std::move(a);
  return encoder;
}

int lower_string_class_labels(Graph& graph) {
  // The classifiers, each with the attribute that holds integer labels.
  static const std::map<std::string, std::string> kInts = {
      {"TreeEnsembleClassifier", "classlabels_int64s"},
      {"LinearClassifier", "classlabels_ints"},
      {"SVMClassifier", "classlabels_ints"}};
  std::set<std::string> names = value_names(graph);
  std::vector<Node> added;
  for (Node& n : graph.nodes) {
    auto ints = kInts.find(n.op_type);
    if (n.domain != kMl || ints == kInts.end() || !n.has_attr("classlabels_strings") ||
        n.has_attr(ints->second) || n.outputs.empty() || n.outputs[0].empty())
      continue;
    const std::vector<std::string> labels = n.attr_strings("classlabels_strings");
    std::vector<int64_t> index(labels.size());
    for (size_t i = 0; i < index.size(); ++i) index[i] = static_cast<int64_t>(i);
    const std::string ids = fresh_name(names, n.outputs[0] + "/class_index");
    // keys_int64s -> values_strings
    Node encoder = label_encoder(
        (n.name.empty() ? n.op_type : n.name) + "/class_labels", ids, n.outputs[0],
        graph.nodes.size() + added.size(),
        {ints_attribute("keys_int64s", index), strings_attribute("values_strings", labels)});
    n.outputs[0] = ids;
    n.attributes.erase("classlabels_strings");
    n.attributes[ints->second] = ints_attribute(ints->second, index);
    added.push_back(std::move(encoder));
  }
  const int count = static_cast<int>(added.size());
  for (Node& a : added) graph.nodes.push_back(std::move(a));
  return count;
}

int lower_string_tfidf(Graph& graph) {
  std::set<std::string> names = value_names(graph);
  std::vector<Node> nodes;
  int count = 0;
  for (Node& n : graph.nodes) {
    if (n.domain.empty() && n.op_type == "TfIdfVectorizer" && n.has_attr("pool_strings") &&
        !n.has_attr("pool_int64s") && !n.inputs.empty() && !n.inputs[0].empty()) {
      // Each distinct word of the pool gets an id; the pool becomes those ids.
      const std::vector<std::string> pool = n.attr_strings("pool_strings");
      std::map<std::string, int64_t> ids;
      std::vector<std::string> words;
      std::vector<int64_t> pool_ids;
      for (const std::string& w : pool) {
        auto [it, added] = ids.emplace(w, static_cast<int64_t>(words.size()));
        if (added) words.push_back(w);
        pool_ids.push_back(it->second);
      }
      const std::string word_ids = fresh_name(names, n.inputs[0] + "/word_ids");
      std::vector<int64_t> word_index(words.size());
      for (size_t i = 0; i < words.size(); ++i) word_index[i] = static_cast<int64_t>(i);
      Attribute fallback;
      fallback.name = "default_int64";
      fallback.kind = Attribute::Kind::Int;
      fallback.i = -1;  // a word outside the pool: no id of the pool
      // keys_strings -> values_int64s, default_int64
      nodes.push_back(label_encoder((n.name.empty() ? n.op_type : n.name) + "/word_ids",
                                    n.inputs[0], word_ids,
                                    graph.nodes.size() + static_cast<size_t>(count),
                                    {strings_attribute("keys_strings", words),
                                     ints_attribute("values_int64s", word_index), fallback}));
      n.inputs[0] = word_ids;
      n.attributes.erase("pool_strings");
      n.attributes["pool_int64s"] = ints_attribute("pool_int64s", pool_ids);
      ++count;
    }
    nodes.push_back(std::move(n));
  }
  graph.nodes = std::move(nodes);
  return count;
}

}  // namespace quilt
