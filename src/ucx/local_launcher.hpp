// LocalLauncher: starts n copies of a program on this host the way torchrun does — plain
// processes with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE in their environment, no MPI
// — plus STRAGGLAR_STORE_DIR, a fresh directory for a DirectoryStore. For the UCX tests and
// benchmark (tests/ucx, tools/ucx_bench); not part of the library's API.
#pragma once
#include <string>
#include <vector>

namespace stragglar {

struct LaunchOptions {
  int nprocs = 1;
  std::vector<std::string> argv;  // argv[0] is the program (a path)
  // Seconds until every process still running is killed (SIGKILL); the run then reports it.
  double timeout_s = 600;
  // When every rank but `victim` has exited, kill `victim` (a test's SIGSTOPped rank). -1: none.
  int victim = -1;
};

struct ProcessExit {
  int rank = 0;
  int pid = 0;
  bool exited = false;   // normal exit with `code`; otherwise killed by `signal`
  int code = 0;
  int signal = 0;
  bool killed_by_launcher = false;  // the timeout or the victim rule ended it
  double seconds = 0;               // from launch to exit
  bool ok() const { return exited && code == 0; }
  std::string describe() const;     // "rank 3 (pid 123): exit 0 after 1.2 s", "killed by signal 9 ..."
};

// Runs the processes to completion; the store directory (under $TMPDIR or /tmp) is removed
// afterwards. Children die with the launcher (PR_SET_PDEATHSIG). Throws Error(SystemError)
// when a process cannot be started.
std::vector<ProcessExit> launch_local(const LaunchOptions& options);

// This program's own path (/proc/self/exe), to launch copies of itself.
std::string self_executable();

}  // namespace stragglar
