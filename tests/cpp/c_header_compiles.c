/* The public header must compile as C (C11) and link; exercise a few calls. */
#include "pocketllm/pocketllm.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  pllm_model* model = NULL;
  pllm_model_params mp = pllm_model_default_params();
  pllm_status s = pllm_model_load("/nonexistent/model.gguf", &mp, &model);
  if (s != PLLM_ERR_IO || model != NULL || strlen(pllm_last_error()) == 0) {
    fprintf(stderr, "expected an I/O error for a missing file, got %d (%s)\n", (int)s, pllm_last_error());
    return 1;
  }
  pllm_sampling_params sp = pllm_sampling_default_params();
  if (sp.max_tokens <= 0 || strlen(pllm_isa()) == 0) return 1;
  printf("C API ok: %s, isa %s\n", pllm_version(), pllm_isa());
  return 0;
}
