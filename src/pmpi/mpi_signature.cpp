// MPI datatypes and ops in stragglar's terms (mpi_signature.hpp).
#include "pmpi/mpi_signature.hpp"

#include <array>
#include <mutex>

namespace stragglar::pmpi {
namespace {

enum class Kind { floating, integer };

struct BasicEntry {
  MPI_Datatype type;
  DataType dtype;
};

// Every predefined type we reduce: C, fixed-size and Fortran names, mapped by their kind and
// their size in this MPI (MPI_LONG is int64 on LP64; MPI_INTEGER is whatever the Fortran
// compiler made it). Built once, after MPI_Init (MPI_Type_size needs MPI).
struct BasicTable {
  std::array<BasicEntry, 32> entries{};
  int size = 0;

  void add(MPI_Datatype type, Kind kind) {
    if (type == MPI_DATATYPE_NULL) return;  // a Fortran type of an MPI built without Fortran
    int bytes = 0;
    if (PMPI_Type_size(type, &bytes) != MPI_SUCCESS) return;
    if (kind == Kind::floating && bytes == 4) entries[size++] = {type, DataType::float32};
    else if (kind == Kind::floating && bytes == 8) entries[size++] = {type, DataType::float64};
    else if (kind == Kind::floating && bytes == 2) entries[size++] = {type, DataType::float16};
    else if (kind == Kind::integer && bytes == 4) entries[size++] = {type, DataType::int32};
    else if (kind == Kind::integer && bytes == 8) entries[size++] = {type, DataType::int64};
  }
};

const BasicTable& basic_table() {
  static BasicTable table;
  static std::once_flag once;
  std::call_once(once, [] {
    // The most common first: the lookup stops at the first match.
    for (MPI_Datatype t : {MPI_FLOAT, MPI_DOUBLE, MPI_REAL, MPI_DOUBLE_PRECISION, MPI_REAL4, MPI_REAL8})
      table.add(t, Kind::floating);
#ifdef MPIX_C_FLOAT16
    table.add(MPIX_C_FLOAT16, Kind::floating);
#endif
    for (MPI_Datatype t : {MPI_INT, MPI_LONG, MPI_LONG_LONG, MPI_INT32_T, MPI_INT64_T, MPI_INTEGER, MPI_INTEGER4,
                           MPI_INTEGER8, MPI_AINT, MPI_OFFSET, MPI_COUNT})
      table.add(t, Kind::integer);
    // MPI_LONG_LONG_INT is MPI_LONG_LONG's other name (the same handle in both MPIs).
    table.add(MPI_LONG_LONG_INT, Kind::integer);
  });
  return table;
}

}  // namespace

std::optional<DataType> basic_type(MPI_Datatype type) {
  const BasicTable& table = basic_table();
  for (int i = 0; i < table.size; ++i)
    if (table.entries[i].type == type) return table.entries[i].dtype;
  return std::nullopt;
}

std::optional<Signature> signature_of(long long count, MPI_Datatype type) {
  if (count < 0) return std::nullopt;  // MPI reports the error
  if (const std::optional<DataType> t = basic_type(type)) return Signature{*t, static_cast<std::size_t>(count)};
  return std::nullopt;
}

std::optional<ReduceOp> reduce_op(MPI_Op op) {
  if (op == MPI_SUM) return ReduceOp::sum;
  if (op == MPI_MAX) return ReduceOp::max;
  if (op == MPI_MIN) return ReduceOp::min;
  if (op == MPI_PROD) return ReduceOp::prod;
  return std::nullopt;
}

}  // namespace stragglar::pmpi
