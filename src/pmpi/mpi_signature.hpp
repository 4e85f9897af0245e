// What an MPI_Allreduce's (count, datatype, op) means in stragglar's terms (docs/preload.md
// "What goes through").
//
// The preload's decision must be the same on every rank, so it reads only what MPI makes ranks
// agree on. With a predefined op (SUM, PROD, MIN, MAX) MPI accepts only predefined datatypes
// (Open MPI and MPICH answer MPI_ERR_OP for a derived one), so every rank of a correct program
// passes the same count and a predefined type of the same kind and size: MPI_INT, MPI_INT32_T
// and MPI_INTEGER all map to int32 here, so ranks that name the type differently still decide
// alike. Derived datatypes pass through to MPI (which reports the error, or runs a user op).
#pragma once
#include <mpi.h>

#include <cstddef>
#include <optional>

#include "stragglar/types.hpp"

namespace stragglar::pmpi {

struct Signature {
  DataType dtype;        // the element type
  std::size_t elements;  // how many the call reduces (the same on every rank)
};

// The stragglar element type of a predefined MPI datatype we reduce exactly, by kind and size
// (MPI_INT, MPI_INT32_T and MPI_INTEGER are all int32), or nullopt. Cheap: compares handles.
std::optional<DataType> basic_type(MPI_Datatype type);

// `count` elements of `type` as stragglar sees them; nullopt for a type we do not reduce
// (derived, unsigned, complex, logical, pair types, ...) or a negative count.
std::optional<Signature> signature_of(long long count, MPI_Datatype type);

// MPI_SUM/PROD/MIN/MAX; nullopt for every other op (MAXLOC, logical and bitwise ops, user ops).
std::optional<ReduceOp> reduce_op(MPI_Op op);

}  // namespace stragglar::pmpi
