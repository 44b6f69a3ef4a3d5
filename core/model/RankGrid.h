//===- RankGrid.h - Megatron-LM's rank grid -------------------------------===//
//
// Megatron-LM's parallel_state.RankGenerator: the world is a grid of the
// parallel sizes in an order string (`tp-cp-ep-dp-pp`, the leftmost
// dimension fastest), and a group of a dimension (or of several, `tp-pp`)
// holds the ranks that differ only there. hypipe's ranks are placed by it, so
// a plan's Megatron-LM flags mean the same ranks in both; the test set checks
// its groups against megatron-core's own RankGenerator for many shapes.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_RANKGRID_H
#define HYPIPE_CORE_MODEL_RANKGRID_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hypipe {

/// Megatron's default order, and the one of --use-tp-pp-dp-mapping.
inline constexpr std::string_view kRankOrder = "tp-cp-ep-dp-pp";
inline constexpr std::string_view kTpPpDpRankOrder = "tp-cp-ep-pp-dp";

class RankGrid {
public:
  /// The grid of `order` (dimension names joined by `-`, each of tp, cp, ep,
  /// dp, pp at most once) over the sizes given; a dimension of size 1 left
  /// out goes last, as in Megatron (order() then names it). Nullopt with
  /// `why` set when the order is not such a string, leaves out a dimension
  /// above 1, or a size is below 1.
  static std::optional<RankGrid> make(int64_t tp, int64_t cp, int64_t ep,
                                      int64_t dp, int64_t pp,
                                      std::string_view order, std::string *why);
  /// tp x cp x ep x dp x pp in Megatron's default order.
  static RankGrid megatron(int64_t tp, int64_t dp, int64_t pp);
  /// The expert grid beside the dense grid `dense` (whose ep is 1), as
  /// Megatron's initialize_model_parallel builds it for MoE layers:
  /// tp = `etp`, ep = `ep`, dp = the expert-data-parallel size world /
  /// (etp x ep x pp), cp = 1, in `order` (the order the dense grid was
  /// made with, as the user wrote it: an ep above 1 must be named in it, as
  /// Megatron's RankGenerator requires). Nullopt with `why`
  /// set where Megatron refuses it: the world is not a multiple of
  /// etp x ep x pp, the order does not end in pp while the expert dp differs
  /// from the dense one, or the two grids' pipeline groups differ.
  static std::optional<RankGrid> expert(const RankGrid &dense, int64_t ep,
                                        int64_t etp, std::string_view order,
                                        std::string *why);

  int64_t world() const;
  /// The size of dimension `name` (tp, cp, ep, dp, pp).
  int64_t size(std::string_view name) const;
  /// World rank `rank`'s index along dimension `name`.
  int64_t coordinate(int64_t rank, std::string_view name) const;
  /// The world rank with the coordinates of `rank` but `name` set to
  /// `index`.
  int64_t withCoordinate(int64_t rank, std::string_view name,
                         int64_t index) const;
  /// Megatron's get_ranks(token): for `token` (one or more dimensions joined
  /// by `-`, e.g. `tp`, `tp-pp`), every group of ranks that differ only in
  /// those dimensions: each group in grid order (leftmost fastest), the
  /// groups in the grid order of the other dimensions.
  std::vector<std::vector<int64_t>> groups(std::string_view token) const;
  /// The group of `token` that holds `rank`.
  std::vector<int64_t> groupOf(int64_t rank, std::string_view token) const;

  const std::string &order() const { return orderText; }

private:
  std::vector<std::string> names; ///< in order, fastest first
  std::vector<int64_t> sizes;
  std::string orderText;
  int64_t index(std::string_view name) const;
  int64_t stride(int64_t dim) const;
  std::vector<int64_t> dimsOf(std::string_view token) const;
};

} // namespace hypipe

#endif
