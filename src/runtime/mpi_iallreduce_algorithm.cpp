// MPI_Iallreduce's algorithm for auto's bounded native (mpi_iallreduce_algorithm.hpp).
#include "runtime/mpi_iallreduce_algorithm.hpp"

#include <cstring>

namespace stragglar::detail {
namespace {

constexpr const char* kVariable = "coll_libnbc_iallreduce_algorithm";  // Open MPI 4.x / 5.x libnbc
constexpr int kRabenseifner = 3;  // its enum: 0 ignore, 1 ring, 2 binomial, 3 rabenseifner, 4 recursive doubling

// The index of `name` among the tool interface's control variables, or -1.
int find_control_variable(const char* name) {
  int count = 0;
  if (MPI_T_cvar_get_num(&count) != MPI_SUCCESS) return -1;
  for (int i = 0; i < count; ++i) {
    char found[256];
    int found_len = sizeof found, verbosity = 0, bind = 0, scope = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype = MPI_T_ENUM_NULL;
    int desc_len = 0;  // no description wanted
    if (MPI_T_cvar_get_info(i, found, &found_len, &verbosity, &type, &enumtype, nullptr, &desc_len, &bind,
                            &scope) != MPI_SUCCESS)
      continue;
    if (std::strcmp(found, name) == 0)
      return type == MPI_INT && bind == MPI_T_BIND_NO_OBJECT && scope != MPI_T_SCOPE_CONSTANT &&
                     scope != MPI_T_SCOPE_READONLY
                 ? i
                 : -1;
  }
  return -1;
}

// The variable's handle, or none where it cannot be used safely.
struct ToolVariable {
  bool active = false;
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
};

ToolVariable find_tool_variable() {
  ToolVariable v;
  int thread_level = MPI_THREAD_SINGLE;
  // Write, call, restore are three MPI calls: no other thread may call MPI between them (under
  // SERIALIZED or MULTIPLE another thread's MPI_Iallreduce could see our setting).
  if (MPI_Query_thread(&thread_level) != MPI_SUCCESS || thread_level > MPI_THREAD_FUNNELED) return v;
  int provided = 0;
  if (MPI_T_init_thread(thread_level, &provided) != MPI_SUCCESS) return v;
  // Never MPI_T_finalize'd: the handle serves every communicator until the process ends.
  const int index = find_control_variable(kVariable);
  int elements = 0;
  if (index < 0 || MPI_T_cvar_handle_alloc(index, nullptr, &v.handle, &elements) != MPI_SUCCESS || elements != 1)
    return v;
  v.active = true;
  return v;
}

const ToolVariable& tool_variable() {
  static const ToolVariable v = find_tool_variable();  // once per process (thread-safe)
  return v;
}

}  // namespace

void IallreduceAlgorithmChoice::prepare() { (void)tool_variable(); }

bool IallreduceAlgorithmChoice::active() { return tool_variable().active; }

int IallreduceAlgorithmChoice::post(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                                    MPI_Comm comm, MPI_Request* request) {
  const ToolVariable& v = tool_variable();
  int application_value = 0;
  const bool chosen = v.active && MPI_T_cvar_read(v.handle, &application_value) == MPI_SUCCESS &&
                      MPI_T_cvar_write(v.handle, &kRabenseifner) == MPI_SUCCESS;
  // The schedule is built inside the call: restoring right after it leaves the variable as the
  // application set it for everything else.
  const int rc = MPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, request);
  if (chosen) MPI_T_cvar_write(v.handle, &application_value);
  return rc;
}

}  // namespace stragglar::detail
