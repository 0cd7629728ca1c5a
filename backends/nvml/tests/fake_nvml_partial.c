/* A test-only NVML stand-in exporting the four required symbols, nvmlDeviceGetName and
 * nvmlErrorString, and nothing else: the backend must report every other capability as
 * NotSupported without crashing. Built with ERG_FAKE_NVML_NO_INIT it exports no init symbol.
 *
 * Controlled by the environment, read at each call:
 *   ERG_FAKE_NVML_COUNT        number of GPUs (default 1, at most 8)
 *   ERG_FAKE_NVML_INIT_RETURN  what nvmlInit_v2 returns (default 0 = NVML_SUCCESS)
 *   ERG_FAKE_NVML_DENY_INDEX   index whose handle is refused with NVML_ERROR_NO_PERMISSION */
#include <stdio.h>
#include <stdlib.h>

#include "erg/backends/nvml/nvml_abi.h"

struct nvmlDevice_st {
  unsigned index;
};

static struct nvmlDevice_st devices[8] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};

static int env_int(const char* name, int fallback) {
  const char* value = getenv(name);
  return value != NULL && *value != '\0' ? atoi(value) : fallback;
}

#ifndef ERG_FAKE_NVML_NO_INIT
nvmlReturn_t nvmlInit_v2(void) { return (nvmlReturn_t)env_int("ERG_FAKE_NVML_INIT_RETURN", 0); }
#endif

nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions (fake)";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded (fake)";
    default: return "Unknown Error (fake)";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  int n = env_int("ERG_FAKE_NVML_COUNT", 1);
  if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *count = (unsigned)(n < 0 ? 0 : n > 8 ? 8 : n);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  unsigned count = 0;
  nvmlDeviceGetCount_v2(&count);
  if (device == NULL || index >= count) return NVML_ERROR_INVALID_ARGUMENT;
  if (env_int("ERG_FAKE_NVML_DENY_INDEX", -1) == (int)index) return NVML_ERROR_NO_PERMISSION;
  *device = &devices[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  if (device == NULL || name == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (snprintf(name, length, "Fake Partial GPU %u", device->index) >= (int)length) return NVML_ERROR_INSUFFICIENT_SIZE;
  return NVML_SUCCESS;
}
