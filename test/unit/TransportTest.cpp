//===- TransportTest.cpp - one conformance suite for every transport -----===//
//
// Run under mpirun at 2 to 4 ranks (ctest's transport-* entries):
//
//   mpirun -np N hypipe-transport-tests --comm mpi|mpi-staged|nccl --pp P
//                          [--tp T] [--device cuda] [--abort-rank R]
//
// (--device cuda and --comm nccl: the GPU kit's `transports` suite.)
// The world is a P x (N / (P T)) x T grid as the trainer makes it. Every rank
// runs every test; a failing assertion on any rank fails the run. Expected
// values are computed here from what each rank put in (small integers, so that
// fp32 and bf16 sums are exact and independent of the order of addition).
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Transport.h"
#include "core/numeric/Bf16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace hypipe::rt {
namespace {

Comm *gComm = nullptr;
CommKind gKind = CommKind::Mpi;
bool gCuda = false; ///< --device cuda: buffers on the GPU (the GPU kit)

std::unique_ptr<Device> makeDevice() {
  if (!gCuda)
    return makeHostDevice();
  // Ranks beyond the GPUs share them, as mpi-staged runs do.
  return makeCudaDevice(gComm->nodeRank() % std::max(1, cudaDeviceCount()));
}

/// A buffer of `n` elements of `type` in the device's memory, written and
/// read through a host copy: set() then push() before an operation, pull()
/// then get() after it.
struct Payload {
  Payload(Device &device, int64_t n, DType type)
      : type(type), n(n), host(size_t(n * width())),
        bytes(DeviceArray<char>(device, n * width())) {}
  int64_t width() const { return type == DType::BF16 ? 2 : 4; }
  void set(int64_t i, float v) {
    if (type == DType::BF16) {
      const uint16_t b = bf16::fromFloat(v);
      std::memcpy(host.data() + 2 * i, &b, 2);
    } else {
      std::memcpy(host.data() + 4 * i, &v, 4);
    }
  }
  float get(int64_t i) const {
    if (type == DType::BF16) {
      uint16_t b;
      std::memcpy(&b, host.data() + 2 * i, 2);
      return bf16::toFloat(b);
    }
    float v;
    std::memcpy(&v, host.data() + 4 * i, 4);
    return v;
  }
  void push() { bytes.upload(host.data(), int64_t(host.size())); }
  void pull() { host = bytes.download(); }
  void *data() { return bytes.data(); }
  DType type;
  int64_t n;
  std::vector<char> host;
  DeviceArray<char> bytes;
};

/// A value that rank `r` puts at index `i` of message `m`: a small integer,
/// exact in bf16 and in any sum of up to 4 ranks.
float valueOf(int r, int64_t i, int m = 0) {
  return float((r * 7 + i * 3 + m * 5) % 31 - 15);
}

/// The elements in [begin, end) of `x` that are not `want(i)`: counted,
/// not asserted one by one, so that a rank that sees a wrong value goes on
/// through the same collectives as the others (an early return would leave
/// them waiting).
template <typename Want>
int64_t mismatches(const Payload &x, int64_t begin, int64_t end, Want want) {
  int64_t bad = 0;
  for (int64_t i = begin; i < end; ++i)
    bad += x.get(i) != want(i);
  return bad;
}

class TransportTest : public ::testing::TestWithParam<DType> {
protected:
  void SetUp() override {
    device = makeDevice();
    transport = makeTransport(gKind, *gComm, *device);
    const int n = comm().size(), r = comm().rank();
    if (n > 1)
      transport->connect({(r + 1) % n}, {(r + n - 1) % n});
  }
  /// NCCL links a rank to other ranks only.
  bool pointToPoint() const { return gComm->size() > 1; }
  void TearDown() override {
    transport.reset();
    gComm->barrier();
  }
  Comm &comm() { return *gComm; }
  std::unique_ptr<Device> device;
  std::unique_ptr<Transport> transport;
};

// Several messages with one tag between a pair arrive in the order sent
// (MPI's non-overtaking rule; NCCL's order per peer pair), whatever their
// sizes; every rank sends to the next and receives from the previous.
TEST_P(TransportTest, PointToPointKeepsOrder) {
  if (!pointToPoint())
    GTEST_SKIP() << "one rank";
  const int n = comm().size(), r = comm().rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const std::vector<int64_t> sizes = {1, 7, 1023, 4099};
  std::vector<Payload> out, in;
  std::vector<Transport::Request> requests;
  for (size_t m = 0; m < sizes.size(); ++m)
    in.emplace_back(*device, sizes[m], GetParam());
  for (size_t m = 0; m < sizes.size(); ++m)
    requests.push_back(
        transport->irecv(in[m].data(), sizes[m], GetParam(), prev, /*tag=*/5));
  for (size_t m = 0; m < sizes.size(); ++m) {
    out.emplace_back(*device, sizes[m], GetParam());
    for (int64_t i = 0; i < sizes[m]; ++i)
      out[m].set(i, valueOf(r, i, int(m)));
    out[m].push();
    requests.push_back(
        transport->isend(out[m].data(), sizes[m], GetParam(), next, /*tag=*/5));
  }
  transport->waitAll(requests);
  EXPECT_TRUE(requests.empty());
  for (Payload &p : in)
    p.pull();
  for (size_t m = 0; m < sizes.size(); ++m)
    EXPECT_EQ(mismatches(in[m], 0, sizes[m],
                         [&](int64_t i) { return valueOf(prev, i, int(m)); }),
              0)
        << "message " << m;
}

// A receive posted long before its send, and one posted after its send
// started: both complete with the sent values; messages of different tags
// match their own receives whatever the order they are posted in.
TEST_P(TransportTest, ReceivesPostedEarlyOrLate) {
  if (!pointToPoint())
    GTEST_SKIP() << "one rank";
  const int n = comm().size(), r = comm().rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const int64_t len = 513;
  Payload early(*device, len, GetParam()), late(*device, len, GetParam());
  Payload a(*device, len, GetParam()), b(*device, len, GetParam());
  for (int64_t i = 0; i < len; ++i) {
    a.set(i, valueOf(r, i, 1));
    b.set(i, valueOf(r, i, 2));
  }
  a.push();
  b.push();
  std::vector<Transport::Request> receives{
      transport->irecv(early.data(), len, GetParam(), prev, /*tag=*/11)};
  // The sender makes the early receive wait.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::vector<Transport::Request> sends{
      transport->isend(a.data(), len, GetParam(), next, /*tag=*/11),
      transport->isend(b.data(), len, GetParam(), next, /*tag=*/12)};
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  receives.push_back(
      transport->irecv(late.data(), len, GetParam(), prev, /*tag=*/12));
  transport->waitAll(receives);
  transport->waitAll(sends);
  early.pull();
  late.pull();
  EXPECT_EQ(
      mismatches(early, 0, len, [&](int64_t i) { return valueOf(prev, i, 1); }),
      0);
  EXPECT_EQ(
      mismatches(late, 0, len, [&](int64_t i) { return valueOf(prev, i, 2); }),
      0);
}

// testAll drives operations without blocking and drops the finished ones;
// a completed request list is empty.
TEST_P(TransportTest, TestAllDropsFinishedRequests) {
  if (!pointToPoint())
    GTEST_SKIP() << "one rank";
  const int n = comm().size(), r = comm().rank();
  Payload out(*device, 3, GetParam()), in(*device, 3, GetParam());
  for (int64_t i = 0; i < 3; ++i)
    out.set(i, valueOf(r, i));
  out.push();
  std::vector<Transport::Request> requests{
      transport->irecv(in.data(), 3, GetParam(), (r + n - 1) % n, 1),
      transport->isend(out.data(), 3, GetParam(), (r + 1) % n, 1)};
  while (!transport->testAll(requests)) {
  }
  EXPECT_TRUE(requests.empty());
  in.pull();
  EXPECT_EQ(in.get(2), valueOf((r + n - 1) % n, 2));
}

TEST_P(TransportTest, AllReduceOverDataParallelRanksOfOddSizes) {
  const int64_t dp = comm().dpSize();
  for (int64_t len : {1, 5, 1001}) {
    Payload x(*device, len, GetParam());
    for (int64_t i = 0; i < len; ++i)
      x.set(i, valueOf(int(comm().dpRank()), i));
    x.push();
    std::vector<Transport::Request> rq{
        transport->iallreduceDp(x.data(), len, GetParam())};
    transport->waitAll(rq);
    x.pull();
    EXPECT_EQ(mismatches(x, 0, len,
                         [&](int64_t i) {
                           float want = 0;
                           for (int d = 0; d < dp; ++d)
                             want += valueOf(d, i);
                           return want;
                         }),
              0)
        << "length " << len;
  }
}

// The sum of every rank's block d lands in block d of rank d, where it
// was (NCCL's in-place convention, which the optimizer update reads).
TEST_P(TransportTest, ReduceScatterLeavesEachRankItsSummedBlock) {
  const int64_t dp = comm().dpSize(), me = comm().dpRank();
  for (int64_t block : {1, 3, 257}) {
    Payload x(*device, dp * block, GetParam());
    for (int64_t i = 0; i < dp * block; ++i)
      x.set(i, valueOf(int(me), i));
    x.push();
    std::vector<Transport::Request> rq{
        transport->ireduceScatterDp(x.data(), block, GetParam())};
    transport->waitAll(rq);
    x.pull();
    EXPECT_EQ(mismatches(x, me * block, (me + 1) * block,
                         [&](int64_t i) {
                           float want = 0;
                           for (int d = 0; d < dp; ++d)
                             want += valueOf(d, i);
                           return want;
                         }),
              0)
        << "block " << block;
  }
}

TEST_P(TransportTest, AllGatherFillsEveryBlock) {
  const int64_t dp = comm().dpSize(), me = comm().dpRank();
  for (int64_t block : {1, 3, 257}) {
    Payload x(*device, dp * block, GetParam());
    for (int64_t i = 0; i < dp * block; ++i)
      x.set(i, i / block == me ? valueOf(int(me), i) : 99.0f);
    x.push();
    std::vector<Transport::Request> rq{
        transport->iallgatherDp(x.data(), block, GetParam())};
    transport->waitAll(rq);
    x.pull();
    EXPECT_EQ(mismatches(x, 0, dp * block,
                         [&](int64_t i) { return valueOf(int(i / block), i); }),
              0)
        << "block " << block;
  }
}

// The MoE alltoall dispatcher's exchange over the tensor-parallel group:
// uneven counts, some empty, a rank's block to itself included (at tp 1
// only that: NCCL's grouped send and receive to itself, in the GPU kit).
TEST_P(TransportTest, AllToAllOverTensorParallelRanksWithUnevenCounts) {
  const int64_t tp = comm().tpSize(), me = comm().tpRank();
  // Rank a sends count(a, b) elements to rank b: none from 0 to 1.
  auto count = [](int64_t a, int64_t b) {
    return a == b ? 13 : (a * 5 + b * 3 + 1) % 4 * 11;
  };
  std::vector<int64_t> out, in;
  int64_t outTotal = 0, inTotal = 0;
  for (int64_t p = 0; p < tp; ++p) {
    out.push_back(count(me, p));
    in.push_back(count(p, me));
    outTotal += out.back();
    inTotal += in.back();
  }
  Payload send(*device, std::max<int64_t>(outTotal, 1), GetParam());
  Payload recv(*device, std::max<int64_t>(inTotal, 1), GetParam());
  for (int64_t p = 0, at = 0; p < tp; at += out[size_t(p)], ++p)
    for (int64_t i = 0; i < out[size_t(p)]; ++i)
      send.set(at + i, valueOf(int(me), i, int(p)));
  for (int64_t i = 0; i < inTotal; ++i)
    recv.set(i, 99.0f);
  send.push();
  recv.push();
  std::vector<Transport::Request> rq{
      transport->iallToAllTp(send.data(), out, recv.data(), in, GetParam())};
  transport->waitAll(rq);
  recv.pull();
  for (int64_t p = 0, at = 0; p < tp; at += in[size_t(p)], ++p)
    EXPECT_EQ(
        mismatches(recv, at, at + in[size_t(p)],
                   [&](int64_t i) { return valueOf(int(p), i - at, int(me)); }),
        0)
        << "from tp rank " << p;
}

// A group of the first and last pipeline ranks (the tied embedding's):
// its members get the sum, the ranks outside it are left alone.
TEST_P(TransportTest, GroupSumReachesOnlyItsMembers) {
  const int64_t pp = comm().ppSize();
  if (pp < 2)
    GTEST_SKIP() << "needs two pipeline ranks";
  const Transport::Group g = transport->makeGroup({0, pp - 1});
  const bool member = comm().ppRank() == 0 || comm().ppRank() == pp - 1;
  EXPECT_EQ(g != Transport::kNoGroup, member);
  const int64_t len = 37;
  Payload x(*device, len, GetParam());
  for (int64_t i = 0; i < len; ++i)
    x.set(i, valueOf(int(comm().ppRank()), i));
  x.push();
  std::vector<Transport::Request> rq{
      transport->iallreduce(g, x.data(), len, GetParam())};
  transport->waitAll(rq);
  x.pull();
  EXPECT_EQ(mismatches(x, 0, len,
                       [&](int64_t i) {
                         return member ? valueOf(0, i) + valueOf(int(pp - 1), i)
                                       : valueOf(int(comm().ppRank()), i);
                       }),
            0);
}

// bf16 sums round each partial sum to bf16, as NCCL does: 256 + 1 is 256
// in bf16 (8 bits of mantissa), so two ranks adding 256 and 1 get 256.
TEST(TransportBf16, SumsRoundToBf16) {
  if (gComm->dpSize() != 2)
    GTEST_SKIP() << "needs two data-parallel ranks";
  auto device = makeDevice();
  auto transport = makeTransport(gKind, *gComm, *device);
  Payload x(*device, 2, DType::BF16);
  x.set(0, gComm->dpRank() == 0 ? 256.0f : 1.0f);
  x.set(1, gComm->dpRank() == 0 ? 256.0f : 2.0f);
  x.push();
  std::vector<Transport::Request> rq{
      transport->iallreduceDp(x.data(), 2, DType::BF16)};
  transport->waitAll(rq);
  x.pull();
  EXPECT_EQ(x.get(0), 256.0f);
  EXPECT_EQ(x.get(1), 258.0f);
  transport.reset();
  gComm->barrier();
}

// A wait that lasts names what it waits for, with the peer's host (what the
// watchdog prints): the hook sees it after about a second, here before the
// peer has sent.
TEST(TransportWait, NamesThePeerAndItsHost) {
  if (gComm->size() < 2)
    GTEST_SKIP() << "one rank";
  auto device = makeDevice();
  auto transport = makeTransport(gKind, *gComm, *device);
  const int n = gComm->size(), r = gComm->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  transport->connect({next}, {prev});
  Payload in(*device, 3, DType::F32), out(*device, 3, DType::F32);
  std::vector<Transport::Request> receive{
      transport->irecv(in.data(), 3, DType::F32, prev, /*tag=*/99)};
  std::string seen;
  struct Seen {};
  gComm->setWaitHook([&](double, const std::string &what) {
    seen = what;
    throw Seen{};
  });
  EXPECT_THROW(transport->waitAll(receive), Seen);
  gComm->setWaitHook(nullptr);
  EXPECT_NE(seen.find("receiving from rank " + std::to_string(prev) +
                      " on host " + gComm->hostOf(prev)),
            std::string::npos)
      << seen;
  EXPECT_FALSE(gComm->hostOf(prev).empty());
  // Now the peers send, and the receive completes.
  gComm->barrier();
  std::vector<Transport::Request> send{
      transport->isend(out.data(), 3, DType::F32, next, /*tag=*/99)};
  transport->waitAll(receive);
  transport->waitAll(send);
  transport.reset();
  gComm->barrier();
}

INSTANTIATE_TEST_SUITE_P(Payloads, TransportTest,
                         ::testing::Values(DType::F32, DType::BF16),
                         [](const auto &info) {
                           return info.param == DType::BF16 ? "bf16" : "fp32";
                         });

} // namespace
} // namespace hypipe::rt

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  hypipe::rt::Comm comm(&argc, &argv);
  int64_t pp = 1, tp = 1;
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--comm")
      hypipe::rt::gKind = *hypipe::schedule::parseCommKind(argv[i + 1]);
    if (flag == "--pp")
      pp = std::stoll(argv[i + 1]);
    if (flag == "--tp")
      tp = std::stoll(argv[i + 1]);
    if (flag == "--device")
      hypipe::rt::gCuda = std::string(argv[i + 1]) == "cuda";
  }
  // One rank: NCCL's collectives of one (the GPU kit); MPI needs two.
  const int least = hypipe::rt::gKind == hypipe::rt::CommKind::Nccl ? 1 : 2;
  if (comm.size() < least || comm.size() % (pp * tp)) {
    std::fprintf(stderr,
                 "run under mpirun with at least %d ranks, a "
                 "multiple of --pp x --tp\n",
                 least);
    return 2;
  }
  comm.setGrid(pp, comm.size() / (pp * tp), tp);
  hypipe::rt::gComm = &comm;
  // --abort-rank R: every other rank waits for a message from R, which
  // ends the run instead (as a failing rank does); the launcher must end
  // every rank, not leave them waiting (ctest's transport-abort-*).
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--abort-rank") {
      const int failing = std::stoi(argv[i + 1]);
      auto device = hypipe::rt::makeDevice();
      auto transport =
          hypipe::rt::makeTransport(hypipe::rt::gKind, comm, *device);
      if (comm.rank() == failing) {
        std::fprintf(stderr, "[rank %d] error: failing on purpose\n", failing);
        comm.abort(3);
      }
      float x = 0;
      std::vector<hypipe::rt::Transport::Request> r{
          transport->irecv(&x, 1, hypipe::rt::DType::F32, failing, 5)};
      transport->waitAll(r);
      std::fprintf(stderr, "rank %d: a message from a rank that failed\n",
                   comm.rank());
      return 1;
    }
  const int failed = RUN_ALL_TESTS();
  // Every rank's verdict decides the run's exit status.
  const std::vector<double> all = comm.allgather({double(failed)});
  for (double f : all)
    if (f != 0)
      return 1;
  return 0;
}
