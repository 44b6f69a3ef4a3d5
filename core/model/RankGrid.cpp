//===- RankGrid.cpp - Megatron-LM's rank grid -----------------------------===//

#include "core/model/RankGrid.h"

#include <algorithm>
#include <stdexcept>

namespace hypipe {

namespace {

std::vector<std::string> splitOrder(std::string_view order) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dash = order.find('-', start);
    parts.emplace_back(order.substr(start, dash - start));
    if (dash == std::string_view::npos)
      return parts;
    start = dash + 1;
  }
}

} // namespace

std::optional<RankGrid> RankGrid::make(int64_t tp, int64_t cp, int64_t ep,
                                       int64_t dp, int64_t pp,
                                       std::string_view order,
                                       std::string *why) {
  // In the order of Megatron's name_to_size: the order those left out are
  // appended in.
  const std::pair<const char *, int64_t> known[] = {
      {"tp", tp}, {"pp", pp}, {"dp", dp}, {"ep", ep}, {"cp", cp}};
  RankGrid g;
  g.orderText = std::string(order);
  for (const std::string &name : splitOrder(order)) {
    auto it = std::find_if(std::begin(known), std::end(known),
                           [&](const auto &k) { return name == k.first; });
    if (it == std::end(known) ||
        std::find(g.names.begin(), g.names.end(), name) != g.names.end()) {
      if (why)
        *why = "the order '" + std::string(order) +
               "' must name each of tp, cp, ep, dp and pp at most once, "
               "joined by '-'";
      return std::nullopt;
    }
    if (it->second < 1) {
      if (why)
        *why = name + " must be at least 1";
      return std::nullopt;
    }
    g.names.push_back(name);
    g.sizes.push_back(it->second);
  }
  // As Megatron's RankGenerator: a dimension of size 1 may be left out,
  // and goes last (slowest). (Megatron also lower-cases the order; hypipe
  // takes it as written.)
  for (const auto &[name, size] : known) {
    if (std::find(g.names.begin(), g.names.end(), name) != g.names.end())
      continue;
    if (size != 1) {
      if (why)
        *why = "the order '" + std::string(order) + "' leaves out " + name +
               ", whose size is " + std::to_string(size) +
               ": name each of tp, cp, ep, dp and pp of a size above 1";
      return std::nullopt;
    }
    g.names.push_back(name);
    g.sizes.push_back(1);
    g.orderText += std::string("-") + name;
  }
  return g;
}

RankGrid RankGrid::megatron(int64_t tp, int64_t dp, int64_t pp) {
  std::string why;
  std::optional<RankGrid> g = make(tp, 1, 1, dp, pp, kRankOrder, &why);
  if (!g)
    throw std::invalid_argument(why);
  return *g;
}

std::optional<RankGrid> RankGrid::expert(const RankGrid &dense, int64_t ep,
                                         int64_t etp, std::string_view order,
                                         std::string *why) {
  auto refuse = [&](std::string text) -> std::optional<RankGrid> {
    if (why)
      *why = std::move(text);
    return std::nullopt;
  };
  if (dense.size("ep") != 1)
    return refuse("the dense grid has an ep dimension of " +
                  std::to_string(dense.size("ep")) +
                  "; Megatron builds it with ep 1");
  if (ep < 1 || etp < 1)
    return refuse("ep and etp must be at least 1");
  const int64_t pp = dense.size("pp"), world = dense.world();
  if (world % (etp * ep * pp) != 0)
    return refuse("the world of " + std::to_string(world) +
                  " ranks is not a multiple of etp x ep x pp = " +
                  std::to_string(etp * ep * pp));
  const int64_t edp = world / (etp * ep * pp);
  std::optional<RankGrid> g = make(etp, 1, ep, edp, pp, order, why);
  if (!g)
    return g;
  const bool ppLast =
      order.size() >= 2 && order.substr(order.size() - 2) == "pp";
  if (!ppLast && pp > 1 && edp != dense.size("dp"))
    return refuse("the order '" + std::string(order) +
                  "' does not end in pp, so the MoE layers' data-parallel "
                  "size (" +
                  std::to_string(edp) + ") must equal the dense layers' (" +
                  std::to_string(dense.size("dp")) + ")");
  if (g->groups("pp") != dense.groups("pp"))
    return refuse("the expert grid's pipeline groups differ from the dense "
                  "grid's in the order '" +
                  std::string(order) + "'");
  return g;
}

int64_t RankGrid::world() const {
  int64_t n = 1;
  for (int64_t s : sizes)
    n *= s;
  return n;
}

int64_t RankGrid::index(std::string_view name) const {
  auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end())
    throw std::invalid_argument("no grid dimension '" + std::string(name) +
                                "'");
  return it - names.begin();
}

int64_t RankGrid::stride(int64_t dim) const {
  int64_t s = 1;
  for (int64_t d = 0; d < dim; ++d)
    s *= sizes[size_t(d)];
  return s;
}

int64_t RankGrid::size(std::string_view name) const {
  return sizes[size_t(index(name))];
}

int64_t RankGrid::coordinate(int64_t rank, std::string_view name) const {
  const int64_t d = index(name);
  return rank / stride(d) % sizes[size_t(d)];
}

int64_t RankGrid::withCoordinate(int64_t rank, std::string_view name,
                                 int64_t at) const {
  const int64_t d = index(name);
  return rank + (at - coordinate(rank, name)) * stride(d);
}

std::vector<int64_t> RankGrid::dimsOf(std::string_view token) const {
  std::vector<int64_t> dims;
  for (const std::string &name : splitOrder(token))
    dims.push_back(index(name));
  return dims;
}

std::vector<std::vector<int64_t>>
RankGrid::groups(std::string_view token) const {
  // Megatron's generate_masked_orthogonal_rank_groups: the masked
  // dimensions (the token's, in grid order) vary inside a group, the others
  // number the groups; both count leftmost fastest. A dimension the token
  // names twice is masked once, as Megatron's mask is (tp-tp is tp).
  std::vector<int64_t> masked = dimsOf(token);
  std::sort(masked.begin(), masked.end());
  masked.erase(std::unique(masked.begin(), masked.end()), masked.end());
  std::vector<int64_t> unmasked;
  for (int64_t d = 0; d < int64_t(names.size()); ++d)
    if (!std::binary_search(masked.begin(), masked.end(), d))
      unmasked.push_back(d);
  auto count = [&](const std::vector<int64_t> &dims) {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= sizes[size_t(d)];
    return n;
  };
  // The rank whose coordinates along `dims` are index's digits (leftmost
  // fastest) and zero elsewhere.
  auto place = [&](const std::vector<int64_t> &dims, int64_t index) {
    int64_t rank = 0;
    for (int64_t d : dims) {
      rank += index % sizes[size_t(d)] * stride(d);
      index /= sizes[size_t(d)];
    }
    return rank;
  };
  std::vector<std::vector<int64_t>> out;
  for (int64_t g = 0; g < count(unmasked); ++g) {
    std::vector<int64_t> group;
    for (int64_t i = 0; i < count(masked); ++i)
      group.push_back(place(unmasked, g) + place(masked, i));
    out.push_back(std::move(group));
  }
  return out;
}

std::vector<int64_t> RankGrid::groupOf(int64_t rank,
                                       std::string_view token) const {
  for (std::vector<int64_t> &g : groups(token))
    if (std::find(g.begin(), g.end(), rank) != g.end())
      return g;
  throw std::invalid_argument("rank outside the grid");
}

} // namespace hypipe
