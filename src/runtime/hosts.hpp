// Which ranks share a host (docs/auto.md "Hosts"): every rank's host name, exchanged
// once per communicator, gives auto the hosts for its `hierarchical` candidate and its cost model.
#pragma once
#include <cstdint>
#include <span>

namespace stragglar::detail {

// This process's host, as a non-negative 63-bit hash of its host name (gethostname; the UTS
// name, so each "host" of scripts/cluster.sh is one). Equal on every rank of one host.
std::int64_t this_host_id();

// This process's monotonic clock, as a non-negative 63-bit hash of the running kernel's boot id
// (/proc/sys/kernel/random/boot_id) and its time namespace's offsets (/proc/self/timens_offsets,
// where the kernel has them): processes with equal ids read one CLOCK_MONOTONIC (the clock
// std::chrono::steady_clock reads) — threads, processes, containers and network namespaces of
// one machine — so their timestamps compare. -1 when the boot id cannot be read (then no two
// processes are taken to share a clock).
std::int64_t this_clock_id();

// From every rank's host id (index = rank): the ranks per host when the job spans at least two
// hosts of equally many ranks, numbered host-major (rank r on host r / R, the layout
// `hierarchical` and CostModel::ranks_per_host describe); else 0 (one host, uneven hosts, or
// ranks interleaved across hosts).
int host_major_ranks_per_host(std::span<const std::int64_t> host_of_rank);

}  // namespace stragglar::detail
