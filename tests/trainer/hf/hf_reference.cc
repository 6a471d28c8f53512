#include "tests/trainer/hf/hf_reference.h"

#include <algorithm>
#include <cmath>

namespace conveyor::testing_util {

Matrix Linear(const Matrix& x, const HfTensor& w, const HfTensor* b) {
  const int64_t out = w.shape[0], in = w.shape[1];
  Matrix y(x.size(), std::vector<double>(out, 0.0));
  for (size_t r = 0; r < x.size(); ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = b != nullptr ? b->data[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) sum += x[r][i] * double{w.data[o * in + i]};
      y[r][o] = sum;
    }
  }
  return y;
}

Matrix Conv1D(const Matrix& x, const HfTensor& w, const HfTensor& b) {
  const int64_t in = w.shape[0], out = w.shape[1];
  Matrix y(x.size(), std::vector<double>(out, 0.0));
  for (size_t r = 0; r < x.size(); ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = b.data[o];
      for (int64_t i = 0; i < in; ++i) sum += x[r][i] * double{w.data[i * out + o]};
      y[r][o] = sum;
    }
  }
  return y;
}

Matrix RmsNorm(const Matrix& x, const HfTensor& w, double eps) {
  Matrix y = x;
  for (auto& row : y) {
    double ms = 0;
    for (double v : row) ms += v * v;
    const double scale = 1.0 / std::sqrt(ms / double(row.size()) + eps);
    for (size_t i = 0; i < row.size(); ++i) row[i] *= scale * w.data[i];
  }
  return y;
}

Matrix LayerNorm(const Matrix& x, const HfTensor& w, const HfTensor& b, double eps) {
  Matrix y = x;
  for (auto& row : y) {
    double mean = 0, var = 0;
    for (double v : row) mean += v / double(row.size());
    for (double v : row) var += (v - mean) * (v - mean) / double(row.size());
    for (size_t i = 0; i < row.size(); ++i) {
      row[i] = (row[i] - mean) / std::sqrt(var + eps) * w.data[i] + b.data[i];
    }
  }
  return y;
}

Matrix Rows(const HfTensor& table, const std::vector<int32_t>& ids) {
  const int64_t width = table.shape[1];
  Matrix x(ids.size(), std::vector<double>(width));
  for (size_t p = 0; p < ids.size(); ++p) {
    for (int64_t i = 0; i < width; ++i) x[p][i] = table.data[ids[p] * width + i];
  }
  return x;
}

void AddInto(const Matrix& y, Matrix* x) {
  for (size_t r = 0; r < x->size(); ++r) {
    for (size_t c = 0; c < (*x)[r].size(); ++c) (*x)[r][c] += y[r][c];
  }
}

Matrix CausalAttention(const Matrix& q, const Matrix& k, const Matrix& v, int64_t heads,
                       int64_t kv_heads, int64_t d) {
  const int64_t s = int64_t(q.size());
  Matrix context(s, std::vector<double>(heads * d, 0.0));
  for (int64_t head = 0; head < heads; ++head) {
    const int64_t kv = head / (heads / kv_heads);
    for (int64_t i = 0; i < s; ++i) {
      std::vector<double> score(i + 1);
      double top = -1e300;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += q[i][head * d + c] * k[j][kv * d + c];
        score[j] = dot / std::sqrt(double(d));
        top = std::max(top, score[j]);
      }
      double total = 0;
      for (double& e : score) total += (e = std::exp(e - top));
      for (int64_t j = 0; j <= i; ++j) {
        for (int64_t c = 0; c < d; ++c) {
          context[i][head * d + c] += score[j] / total * v[j][kv * d + c];
        }
      }
    }
  }
  return context;
}

Reference LogitsAndLoss(const Matrix& x, const HfTensor& output_embedding,
                        const std::vector<int32_t>& labels) {
  Reference ref;
  ref.logits = Linear(x, output_embedding);
  ref.loss = 0;
  for (size_t p = 0; p < x.size(); ++p) {
    double top = -1e300, total = 0;
    for (double z : ref.logits[p]) top = std::max(top, z);
    for (double z : ref.logits[p]) total += std::exp(z - top);
    ref.loss += (top + std::log(total) - ref.logits[p][labels[p]]) / double(x.size());
  }
  return ref;
}

double WorstRelativeLogitError(const Matrix& reference, const float* logits,
                               int64_t padded_vocab) {
  double worst = 0;
  for (size_t p = 0; p < reference.size(); ++p) {
    for (size_t v = 0; v < reference[p].size(); ++v) {
      const double want = reference[p][v];
      const double got = logits[p * padded_vocab + v];
      worst = std::max(worst, std::fabs(got - want) / std::max(std::fabs(want), 1.0));
    }
  }
  return worst;
}

}  // namespace conveyor::testing_util
