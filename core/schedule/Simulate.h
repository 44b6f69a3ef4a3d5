//===- Simulate.h - verify and time a schedule by running all ranks -------===//
//
// Runs every rank's program together: each action waits for what it needs
// (the previous stage's forward, the next stage's backward, the data of its
// posted receive) and takes its cost. A program that would hang, runs an action
// twice, misses one, or sends what nobody receives is rejected with the rank x
// step grid around the first stuck action. Given per-action costs it predicts
// start and end of every action, the makespan, each rank's bubble, and peak
// live activations.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_SCHEDULE_SIMULATE_H
#define HYPIPE_CORE_SCHEDULE_SIMULATE_H

#include "core/schedule/CommKind.h"
#include "core/schedule/Schedule.h"

#include <algorithm>
#include <vector>

namespace hypipe::schedule {

struct Costs {
  double f = 1, b = 2, i = 1, w = 1; ///< per stage, unless overridden below
  /// Optional per-stage costs (size numStages) replacing f/b/i/w.
  std::vector<double> stageF, stageB, stageI, stageW;
  double latency = 0;   ///< per transfer, in the same time unit
  double bandwidth = 0; ///< bytes per time unit; 0: transfers take no time
  double sendBytes = 0; ///< bytes of one transfer
  /// Optional per stage boundary (size numStages - 1): the time of one
  /// transfer between stage b and b + 1, either way, replacing transfer()
  /// (a link class per boundary: core/model/Cluster.h).
  std::vector<double> boundaryTransfer;
  /// Optional per stage: the data-parallel reduction of the stage's
  /// gradients, on the rank's one collective stream, so it overlaps the
  /// rank's later compute; the rank's step ends when its reductions are
  /// in. It starts with the stage's last backward on its rank (or at the
  /// stage's REDUCE_GRAD, whole), in `stageBuckets` equal buckets.
  std::vector<double> stageReduce;
  /// Optional per stage: how many equal buckets the reduction goes in. As
  /// hypipe-run (runtime/exec/GradientBuckets.h) and Megatron's overlapped
  /// reduction start a bucket inside the stage's last backward once the
  /// weight gradients it holds are in, bucket j of k is taken to be ready
  /// j/k of the way through that backward's weight-gradient part (the
  /// last W, or the W cost at the end of the last B); the buckets run one
  /// after another. 1 or absent: the whole reduction when the backward
  /// ends.
  std::vector<int64_t> stageBuckets;
  /// Optional per stage: what follows the reductions at the step's end (the
  /// distributed optimizer's all-gather of the updated parameters).
  std::vector<double> stageAfterStep;
  /// Optional per stage: the tensor-parallel collectives one microbatch's
  /// F, and its I (or B), runs inside the stage's kernels (Megatron-LM's
  /// all-reduces, or all-gathers and reduce-scatters with sequence
  /// parallelism). They block the compute that follows, so cost() adds
  /// them to the pass; kept apart so withoutCommunication can drop them.
  std::vector<double> stageTensorF, stageTensorI;
  std::vector<double> activationBytes; ///< per stage, for peak bytes (optional)
  /// How a receive is timed. Posted (what hypipe's runtime, PyTorch's and
  /// NCCL do): the receive is posted where the program writes it and takes
  /// no time there; the action that consumes its data waits for the data.
  /// Not posted: the receive holds its rank until the data is in (a
  /// blocking MPI_Recv where it is written).
  bool postedReceives = true;
  /// NCCL's model on top of posted receives: a rank has one communication
  /// stream per peer (PyTorch's NCCL P2P: one communicator and stream per
  /// pair of ranks), and its sends to and receives from that peer run on it
  /// in program order, each starting when the one before has finished (a
  /// receive batched with the send before it starts with it: one NCCL
  /// group, Megatron's batch_isend_irecv). A send takes the transfer time
  /// on its stream and does not wait for its receive (NCCL's P2P buffers);
  /// a receive holds its stream until the data is in. An early receive so
  /// delays what follows it on the stream, and a receive whose data waits
  /// behind it deadlocks, as under NCCL.
  bool inOrderStreams = false;
  /// With inOrderStreams: a stream per direction of each pair (hypipe's
  /// NCCL transport: a two-rank communicator per direction, so a send to a
  /// peer never queues behind a receive from it) instead of one per pair.
  bool perDirection = false;
  /// The model of transport `kind` (--comm): nccl is in-order streams per
  /// direction, on programs received in send order (receiveInSendOrder);
  /// the MPI transports post receives matched by tag.
  void setComm(CommKind kind) {
    inOrderStreams = perDirection = kind == CommKind::Nccl;
  }

  double cost(Op op, int64_t stage) const;
  /// Whether any transfer or reduction takes time.
  bool hasCommunication() const {
    return transfer() > 0 || !boundaryTransfer.empty() ||
           !stageReduce.empty() || !stageAfterStep.empty() ||
           !stageTensorF.empty() || !stageTensorI.empty();
  }
  /// These costs with every transfer and reduction free (what the step
  /// would take if communication cost nothing).
  Costs withoutCommunication() const {
    Costs free = *this;
    free.latency = free.bandwidth = 0;
    free.boundaryTransfer.clear();
    free.stageReduce.clear();
    free.stageAfterStep.clear();
    free.stageTensorF.clear();
    free.stageTensorI.clear();
    return free;
  }
  double transfer() const {
    return latency + (bandwidth > 0 ? sendBytes / bandwidth : 0);
  }
  /// One transfer from stage `from` to its neighbour `to`.
  double transfer(int64_t from, int64_t to) const {
    const size_t boundary = static_cast<size_t>(std::min(from, to));
    return boundary < boundaryTransfer.size() ? boundaryTransfer[boundary]
                                              : transfer();
  }
};

struct Timing {
  double start = 0, end = 0;
};

struct Simulation {
  double makespan = 0;
  std::vector<double> busy;           ///< compute time per rank
  std::vector<double> bubbleFraction; ///< 1 - busy / makespan, per rank
  /// Per rank: how long its step runs on after its last action for the
  /// data-parallel reductions and what follows them (Costs::stageReduce,
  /// stageAfterStep): the communication the schedule did not hide.
  std::vector<double> exposedReduction;
  /// Peak (stage, microbatch) activation sets alive at once per rank: from a
  /// forward until its backward (or its W when split).
  std::vector<int64_t> peakActivations;
  std::vector<double> peakActivationBytes;
  std::vector<std::vector<Timing>> timings; ///< per rank, per action
};

/// Verifies `schedule` and times it with `costs`. Errors explain what is
/// wrong and show the rank x step grid around it.
Expected<Simulation> simulate(const Schedule &schedule,
                              const Costs &costs = {});

/// Parses `F=1,B=2,I=1,W=1` (any subset) into `costs`.
Error parseCosts(std::string_view text, Costs &costs);

} // namespace hypipe::schedule

#endif
