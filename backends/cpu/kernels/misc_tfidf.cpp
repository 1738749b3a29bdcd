// The CPU TfIdfVectorizer kernel for integer n-grams: the pool's n-grams (sizes min..max) go in
// a map at creation; each row then counts every n-gram taken with gaps of 0..max_skip_count
// (unigrams once), and the counts are weighted by the mode.
#include <algorithm>
#include <map>

#include "backends/cpu/kernel.hpp"
#include "core/checked.hpp"

namespace quilt::cpu {

void register_cpu_misc_tfidf(KernelRegistry& r);

namespace {

class TfIdf : public Kernel {
 public:
  explicit TfIdf(const Node& n)
      : min_(n.attr_int("min_gram_length", 1)),
        max_(n.attr_int("max_gram_length", 1)),
        skip_(n.attr_int("max_skip_count", 0)),
        mode_(n.attr_string("mode", "TF")),
        weights_(n.attr_floats("weights")) {
    const auto pool = n.attr_ints("pool_int64s");
    const auto counts = n.attr_ints("ngram_counts");
    const auto indexes = n.attr_ints("ngram_indexes");
    size_t gram_id = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      const auto size = static_cast<int64_t>(i + 1);
      const int64_t begin = counts[i];
      const int64_t end = i + 1 < counts.size() ? counts[i + 1] : static_cast<int64_t>(pool.size());
      if (begin < 0 || end > static_cast<int64_t>(pool.size()) || end < begin)
        n.fail("ngram_counts " + to_string(counts) + " does not fit pool_int64s of " +
               std::to_string(pool.size()));
      for (int64_t p = begin; p + size <= end; p += size, ++gram_id) {
        if (gram_id >= indexes.size())
          n.fail("ngram_indexes has fewer entries than the pool has n-grams");
        if (size >= min_ && size <= max_)
          grams_[std::vector<int64_t>(pool.begin() + p, pool.begin() + p + size)] =
              indexes[gram_id];
      }
    }
    // Checked: an index of INT64_MAX (fuzz_model, when the node's inference had not run to
    // refuse it first).
    const Checked c(n, "output width");
    for (int64_t i : indexes) width_ = std::max(width_, c.add(i, 1));
    if (!weights_.empty() && static_cast<int64_t>(weights_.size()) < width_)
      n.fail("weights has " + std::to_string(weights_.size()) + " entries, expected " +
             std::to_string(width_));
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
    const int64_t len = x.rank() == 0 ? 1 : x.dim(x.rank() - 1);
    std::vector<int64_t> values(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i)
      values[static_cast<size_t>(i)] =
          x.dtype() == DType::Int64 ? x.data<int64_t>()[i] : x.data<int32_t>()[i];
    float* y = ctx.output(0).data<float>();
    std::vector<int64_t> gram;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t* row = values.data() + r * len;
      std::vector<int64_t> freq(static_cast<size_t>(width_), 0);
      // Only n-grams that fit the row: size <= len and (size - 1) * d <= len - 1, which also
      // bounds the loops when the attributes are huge.
      for (int64_t size = min_; size <= std::min(max_, len); ++size) {
        const int64_t max_d = size == 1 ? 1 : std::min(skip_, (len - 1) / (size - 1) - 1) + 1;
        for (int64_t d = 1; d <= max_d; ++d)
          for (int64_t s = 0; s + (size - 1) * d < len; ++s) {
            gram.clear();
            for (int64_t j = 0; j < size; ++j) gram.push_back(row[s + j * d]);
            auto it = grams_.find(gram);
            if (it != grams_.end()) ++freq[static_cast<size_t>(it->second)];
          }
      }
      for (int64_t i = 0; i < width_; ++i) {
        const auto f = static_cast<float>(freq[static_cast<size_t>(i)]);
        const float w = weights_.empty() ? 1.0f : weights_[static_cast<size_t>(i)];
        float v = f;
        if (mode_ == "IDF") v = f > 0 ? w : 0.0f;
        if (mode_ == "TFIDF") v = w * f;
        y[r * width_ + i] = v;
      }
    }
  }

 private:
  int64_t min_, max_, skip_;
  std::string mode_;
  std::vector<float> weights_;
  std::map<std::vector<int64_t>, int64_t> grams_;  // n-gram -> output column
  int64_t width_ = 0;
};

}  // namespace

void register_cpu_misc_tfidf(KernelRegistry& r) {
  r.add(
      "TfIdfVectorizer",
      [](const NodeSignature& sig) -> std::string {
        const DType d = sig.inputs[0].dtype;
        if (d != DType::Int64 && d != DType::Int32)
          return std::string("input is ") + dtype_name(d) +
                 "; the CPU kernel supports int32 and int64 (no strings)";
        if (sig.node.has_attr("pool_strings")) return "string n-gram pools are not supported";
        return "";
      },
      KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
        return std::make_unique<TfIdf>(sig.node);
      }));
}

}  // namespace quilt::cpu
