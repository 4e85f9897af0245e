/* C consumer of stragglar::runtime from an installed package built without MPI: the C API's
 * defaults and status strings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stragglar/stragglar.h>

int main(void) {
  stragglar_options opts;
  stragglar_options_init(&opts);
  if (opts.algorithm != stragglar_algo_stragglar || opts.straggler != -1 || opts.pipeline != STRAGGLAR_PIPELINE_AUTO ||
      strlen(stragglar_result_string(stragglar_timeout)) == 0) {
    fprintf(stderr, "FAIL: unexpected C API defaults\n");
    return EXIT_FAILURE;
  }
  printf("C consumer: options and status strings ok\n");
  return EXIT_SUCCESS;
}
