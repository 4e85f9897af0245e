// Consumer of stragglar::mpi from an installed package, built in a C++-only project: allreduce
// under mpirun (in place and out of place, two algorithms, float and int64), exact results, and
// the error every rank gets for an argument that is invalid everywhere.
#include <mpi.h>
#include <stragglar/allreduce.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int rank = 0, nranks = 0, failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL rank %d: %s\n", rank, what);
    ++failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const std::size_t count = 1003;
  try {
    // StragglAR in place, float: small integers, so the sum is exact in any order.
    std::vector<float> buf(count);
    for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
    stragglar::Options opts;
    opts.straggler = 0;
    stragglar::allreduce(buf.data(), buf.data(), count, stragglar::DataType::float32, stragglar::ReduceOp::sum,
                         MPI_COMM_WORLD, opts);
    for (std::size_t i = 0; i < count; ++i) {
      const int want = nranks * (nranks + 1) / 2 + nranks * static_cast<int>(i % 7);
      if (buf[i] != static_cast<float>(want)) {
        expect(false, "stragglar float32 sum");
        break;
      }
    }
    // Ring out of place, int64 max.
    std::vector<std::int64_t> in(count), out(count, -1);
    for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<std::int64_t>(i) * 10 + rank;
    stragglar::allreduce(in.data(), out.data(), count, stragglar::DataType::int64, stragglar::ReduceOp::max,
                         MPI_COMM_WORLD, stragglar::options_for("ring"));
    for (std::size_t i = 0; i < count; ++i)
      if (out[i] != static_cast<std::int64_t>(i) * 10 + nranks - 1) {
        expect(false, "ring int64 max");
        break;
      }
  } catch (const stragglar::Error& e) {
    std::fprintf(stderr, "FAIL rank %d: %s: %s\n", rank, stragglar::to_string(e.code()), e.what());
    ++failures;
  }

  // A straggler outside [0, n) on every rank: Error(InvalidUsage) on every rank, nobody blocks.
  try {
    stragglar::Options bad;
    bad.straggler = nranks + 3;
    std::vector<float> buf(8, 1.0f);
    stragglar::allreduce(buf.data(), buf.data(), buf.size(), stragglar::DataType::float32, stragglar::ReduceOp::sum,
                         MPI_COMM_WORLD, bad);
    expect(false, "straggler out of range was accepted");
  } catch (const stragglar::Error& e) {
    expect(e.code() == stragglar::ErrorCode::InvalidUsage, e.what());
  }

  int all_failures = 0;
  MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && all_failures == 0) std::printf("mpi consumer (C++): %d ranks, allreduce exact\n", nranks);
  MPI_Finalize();
  return all_failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
