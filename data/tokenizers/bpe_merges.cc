#include "data/tokenizers/bpe_merges.h"

#include <queue>

namespace conveyor {

void BpeMerges::Add(int32_t left, int32_t right, int32_t rank, int32_t result) {
  table_[Key(left, right)] = Merge{rank, result};
}

const BpeMerges::Merge* BpeMerges::Find(int32_t left, int32_t right) const {
  auto it = table_.find(Key(left, right));
  return it == table_.end() ? nullptr : &it->second;
}

void BpeMerges::Apply(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& ids = *symbols;
  const int n = int(ids.size());
  if (n < 2) return;
  // A doubly linked list over the symbols, and a heap of candidate merges
  // ordered by (rank, position): O(n log n), where rescanning all pairs after
  // each merge would be O(n^2) on long runs such as unspaced CJK text.
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const Merge* m = Find(ids[pos], ids[next[pos]])) heap.push({m->rank, pos, m->result});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    // Skip candidates a previous merge made stale: the left symbol is gone,
    // has no right neighbour any more, or the pair changed.
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const int right = next[top.pos];
    const Merge* m = Find(ids[top.pos], ids[right]);
    if (m == nullptr || m->result != top.result || m->rank != top.rank) continue;
    ids[top.pos] = top.result;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    push(prev[top.pos]);
    push(top.pos);
  }
  int out = 0;
  for (int i = 0; i < n; ++i) {
    if (alive[i]) ids[out++] = ids[i];
  }
  ids.resize(out);
}

}  // namespace conveyor
