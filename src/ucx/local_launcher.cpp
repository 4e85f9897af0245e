// LocalLauncher: fork + exec of n ranks with torchrun's environment (see local_launcher.hpp).
#include "ucx/local_launcher.hpp"

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "stragglar/error.hpp"

extern char** environ;

namespace stragglar {

std::string ProcessExit::describe() const {
  char text[160];
  if (exited)
    std::snprintf(text, sizeof text, "rank %d (pid %d): exit %d after %.1f s", rank, pid, code, seconds);
  else
    std::snprintf(text, sizeof text, "rank %d (pid %d): killed by signal %d (%s)%s after %.1f s", rank, pid, signal,
                  strsignal(signal), killed_by_launcher ? " from the launcher" : "", seconds);
  return text;
}

std::string self_executable() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(ErrorCode::SystemError, "cannot read /proc/self/exe: " + ec.message());
  return p.string();
}

std::vector<ProcessExit> launch_local(const LaunchOptions& o) {
  require(o.nprocs >= 1, "launch_local: nprocs " + std::to_string(o.nprocs) + ", expected >= 1");
  require(!o.argv.empty(), "launch_local: no program to run");
  const char* tmp = std::getenv("TMPDIR");
  std::string dir_template = std::string(tmp && *tmp ? tmp : "/tmp") + "/stragglar-store-XXXXXX";
  if (::mkdtemp(dir_template.data()) == nullptr)
    throw Error(ErrorCode::SystemError, "launch_local: mkdtemp " + dir_template + ": " + std::strerror(errno));
  const std::string store_dir = dir_template;

  // Everything exec needs is built before fork (the child only calls async-signal-safe code).
  std::vector<char*> args;
  for (const std::string& a : o.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> base_env;
  auto set_per_rank = [](const std::string& kv) {
    for (const char* name : {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "STRAGGLAR_STORE_DIR="})
      if (kv.rfind(name, 0) == 0) return true;
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e)
    if (!set_per_rank(*e)) base_env.emplace_back(*e);
  const auto start = std::chrono::steady_clock::now();
  const pid_t parent = ::getpid();
  std::vector<ProcessExit> result(static_cast<std::size_t>(o.nprocs));
  for (int r = 0; r < o.nprocs; ++r) {
    std::vector<std::string> env = base_env;
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("LOCAL_RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + std::to_string(o.nprocs));
    env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(o.nprocs));
    env.push_back("STRAGGLAR_STORE_DIR=" + store_dir);
    std::vector<char*> envp;
    for (std::string& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw Error(ErrorCode::SystemError, std::string("launch_local: fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl
      ::execve(args[0], args.data(), envp.data());
      ::_exit(127);
    }
    result[static_cast<std::size_t>(r)].rank = r;
    result[static_cast<std::size_t>(r)].pid = pid;
  }

  int running = o.nprocs;
  std::vector<bool> done(static_cast<std::size_t>(o.nprocs), false);
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  bool timed_out = false;
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (ProcessExit& e : result) {
        if (e.pid != pid) continue;
        e.exited = WIFEXITED(status);
        e.code = e.exited ? WEXITSTATUS(status) : 0;
        e.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        e.seconds = elapsed();
        done[static_cast<std::size_t>(e.rank)] = true;
        --running;
      }
      continue;
    }
    if (o.victim >= 0 && o.victim < o.nprocs && running == 1 && !done[static_cast<std::size_t>(o.victim)]) {
      ProcessExit& v = result[static_cast<std::size_t>(o.victim)];
      v.killed_by_launcher = true;
      ::kill(v.pid, SIGKILL);
    }
    if (!timed_out && elapsed() > o.timeout_s) {
      timed_out = true;
      for (ProcessExit& e : result)
        if (!done[static_cast<std::size_t>(e.rank)]) {
          e.killed_by_launcher = true;
          ::kill(e.pid, SIGKILL);
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::error_code ec;
  std::filesystem::remove_all(store_dir, ec);
  return result;
}

}  // namespace stragglar
