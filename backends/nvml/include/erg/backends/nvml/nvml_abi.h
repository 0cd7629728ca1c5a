/* erg's own declarations of the NVML C ABI subset it uses (x86-64 Linux, LP64).
 *
 * No vendor header is needed: types, enum values, struct layouts and symbol names follow
 * shared/reference/vendor-abi.md (compiled against nvml.h from CUDA 13.3 / DCGM 4.6), and the
 * static_asserts at the bottom pin every layout byte for byte. Both the NVML backend (through
 * dlsym) and the simulated libnvidia-ml.so.1 (which exports these symbols) use this file.
 *
 * Units at this boundary: power and limits mW (unsigned int), energy mJ (unsigned long long),
 * clocks MHz, temperature °C. */
#ifndef ERG_BACKENDS_NVML_NVML_ABI_H_
#define ERG_BACKENDS_NVML_NVML_ABI_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nvmlDevice_st* nvmlDevice_t;

typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef enum nvmlEnableState_enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;

typedef enum nvmlTemperatureSensors_enum {
  NVML_TEMPERATURE_GPU = 0,
  NVML_TEMPERATURE_COUNT = 1
} nvmlTemperatureSensors_t;

typedef enum nvmlClockType_enum {
  NVML_CLOCK_GRAPHICS = 0,
  NVML_CLOCK_SM = 1,
  NVML_CLOCK_MEM = 2,
  NVML_CLOCK_VIDEO = 3,
  NVML_CLOCK_COUNT = 4
} nvmlClockType_t;

typedef enum nvmlValueType_enum {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
  NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
  NVML_VALUE_TYPE_COUNT = 7
} nvmlValueType_t;

typedef unsigned int nvmlDeviceArchitecture_t;
#define NVML_DEVICE_ARCH_KEPLER 2
#define NVML_DEVICE_ARCH_MAXWELL 3
#define NVML_DEVICE_ARCH_PASCAL 4
#define NVML_DEVICE_ARCH_VOLTA 5
#define NVML_DEVICE_ARCH_TURING 6
#define NVML_DEVICE_ARCH_AMPERE 7
#define NVML_DEVICE_ARCH_ADA 8
#define NVML_DEVICE_ARCH_HOPPER 9
#define NVML_DEVICE_ARCH_BLACKWELL 10
#define NVML_DEVICE_ARCH_T23X 11
#define NVML_DEVICE_ARCH_RUBIN 13
#define NVML_DEVICE_ARCH_UNKNOWN 0xffffffffu

typedef unsigned char nvmlPowerScopeType_t;
#define NVML_POWER_SCOPE_GPU 0u
#define NVML_POWER_SCOPE_MODULE 1u
#define NVML_POWER_SCOPE_MEMORY 2u

#define NVML_INIT_FLAG_NO_GPUS 1u
#define NVML_INIT_FLAG_NO_ATTACH 2u
#define NVML_INIT_FLAG_FORCE_INIT 4u

#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* Field IDs (nvmlDeviceGetFieldValues). */
#define NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION 83
#define NVML_FI_DEV_POWER_AVERAGE 185
#define NVML_FI_DEV_POWER_INSTANT 186
#define NVML_FI_DEV_POWER_MIN_LIMIT 187
#define NVML_FI_DEV_POWER_MAX_LIMIT 188
#define NVML_FI_DEV_POWER_DEFAULT_LIMIT 189
#define NVML_FI_DEV_POWER_CURRENT_LIMIT 190
#define NVML_FI_DEV_ENERGY 191

typedef union nvmlValue_st {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
  unsigned int fieldId;      /* in */
  unsigned int scopeId;      /* in: power scope */
  long long timestamp;       /* out: CPU µs since 1970 */
  long long latencyUsec;     /* out */
  nvmlValueType_t valueType; /* out */
  nvmlReturn_t nvmlReturn;   /* out: per-field status; value undefined unless SUCCESS */
  nvmlValue_t value;         /* out */
} nvmlFieldValue_t;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "%04X:%02X:%02X.0" */
  unsigned int domain;                                     /* 0..0xffffffff */
  unsigned int bus;                                        /* 0..0xff */
  unsigned int device;                                     /* 0..31 */
  unsigned int pciDeviceId;                                /* 16-bit device id << 16 | 16-bit vendor id */
  unsigned int pciSubSystemId;                             /* 32-bit sub-system id */
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];          /* "%08X:%02X:%02X.0" */
} nvmlPciInfo_t;

typedef struct nvmlTemperature_v1_st {
  unsigned int version; /* nvmlTemperature_v1 */
  nvmlTemperatureSensors_t sensorType;
  int temperature; /* °C */
} nvmlTemperature_t;
#define nvmlTemperature_v1 0x0100000Cu

/* A running process (nvmlProcessInfo_v2_t, what nvmlDeviceGetComputeRunningProcesses_v3 fills per
 * the current headers; drivers 535.43-535.86 used a 32-byte stride, see vendor-abi.md §1.3). */
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory; /* bytes; NVML_VALUE_NOT_AVAILABLE under WDDM */
  unsigned int gpuInstanceId;       /* 0xFFFFFFFF when not MIG */
  unsigned int computeInstanceId;   /* 0xFFFFFFFF when not MIG */
} nvmlProcessInfo_t;
#define NVML_VALUE_NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFull
#define NVML_INSTANCE_ID_NONE 0xFFFFFFFFu

/* One per-process utilization sample (nvmlDeviceGetProcessUtilization). */
typedef struct nvmlProcessUtilizationSample_st {
  unsigned int pid;
  unsigned long long timeStamp; /* CPU timestamp, µs */
  unsigned int smUtil;          /* % */
  unsigned int memUtil;         /* % */
  unsigned int encUtil;         /* % */
  unsigned int decUtil;         /* % */
} nvmlProcessUtilizationSample_t;

#define NVML_DEVICE_MIG_DISABLE 0u
#define NVML_DEVICE_MIG_ENABLE 1u

/* Function pointer types of every symbol erg resolves (versioned names where the header maps them). */
typedef nvmlReturn_t (*nvmlInit_v2_fn)(void);
typedef nvmlReturn_t (*nvmlInitWithFlags_fn)(unsigned int flags);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t result);
typedef nvmlReturn_t (*nvmlSystemGetDriverVersion_fn)(char* version, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetCount_v2_fn)(unsigned int* deviceCount);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int index, nvmlDevice_t* device);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByUUID_fn)(const char* uuid, nvmlDevice_t* device);
typedef nvmlReturn_t (*nvmlDeviceGetIndex_fn)(nvmlDevice_t device, unsigned int* index);
typedef nvmlReturn_t (*nvmlDeviceGetName_fn)(nvmlDevice_t device, char* name, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetUUID_fn)(nvmlDevice_t device, char* uuid, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_v3_fn)(nvmlDevice_t device, nvmlPciInfo_t* pci);
typedef nvmlReturn_t (*nvmlDeviceGetArchitecture_fn)(nvmlDevice_t device, nvmlDeviceArchitecture_t* arch);
typedef nvmlReturn_t (*nvmlDeviceGetTotalEnergyConsumption_fn)(nvmlDevice_t device, unsigned long long* energy);
typedef nvmlReturn_t (*nvmlDeviceGetFieldValues_fn)(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t* values);
typedef nvmlReturn_t (*nvmlDeviceGetPowerUsage_fn)(nvmlDevice_t device, unsigned int* power);
typedef nvmlReturn_t (*nvmlDeviceGetPowerManagementLimit_fn)(nvmlDevice_t device, unsigned int* limit);
typedef nvmlReturn_t (*nvmlDeviceGetPowerManagementLimitConstraints_fn)(nvmlDevice_t device, unsigned int* minLimit,
                                                                        unsigned int* maxLimit);
typedef nvmlReturn_t (*nvmlDeviceGetPowerManagementDefaultLimit_fn)(nvmlDevice_t device, unsigned int* defaultLimit);
typedef nvmlReturn_t (*nvmlDeviceSetPowerManagementLimit_fn)(nvmlDevice_t device, unsigned int limit);
typedef nvmlReturn_t (*nvmlDeviceGetPersistenceMode_fn)(nvmlDevice_t device, nvmlEnableState_t* mode);
typedef nvmlReturn_t (*nvmlDeviceSetPersistenceMode_fn)(nvmlDevice_t device, nvmlEnableState_t mode);
typedef nvmlReturn_t (*nvmlDeviceGetSupportedMemoryClocks_fn)(nvmlDevice_t device, unsigned int* count,
                                                              unsigned int* clocksMHz);
typedef nvmlReturn_t (*nvmlDeviceGetSupportedGraphicsClocks_fn)(nvmlDevice_t device, unsigned int memoryClockMHz,
                                                                unsigned int* count, unsigned int* clocksMHz);
typedef nvmlReturn_t (*nvmlDeviceGetClockInfo_fn)(nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock);
typedef nvmlReturn_t (*nvmlDeviceSetGpuLockedClocks_fn)(nvmlDevice_t device, unsigned int minGpuClockMHz,
                                                        unsigned int maxGpuClockMHz);
typedef nvmlReturn_t (*nvmlDeviceResetGpuLockedClocks_fn)(nvmlDevice_t device);
typedef nvmlReturn_t (*nvmlDeviceSetMemoryLockedClocks_fn)(nvmlDevice_t device, unsigned int minMemClockMHz,
                                                           unsigned int maxMemClockMHz);
typedef nvmlReturn_t (*nvmlDeviceResetMemoryLockedClocks_fn)(nvmlDevice_t device);
typedef nvmlReturn_t (*nvmlDeviceGetTemperature_fn)(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                                    unsigned int* temp);
typedef nvmlReturn_t (*nvmlDeviceGetTemperatureV_fn)(nvmlDevice_t device, nvmlTemperature_t* temperature);
typedef nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses_v3_fn)(nvmlDevice_t device, unsigned int* infoCount,
                                                                   nvmlProcessInfo_t* infos);
typedef nvmlReturn_t (*nvmlDeviceGetProcessUtilization_fn)(nvmlDevice_t device,
                                                           nvmlProcessUtilizationSample_t* utilization,
                                                           unsigned int* processSamplesCount,
                                                           unsigned long long lastSeenTimeStamp);
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t device, unsigned int* currentMode,
                                                unsigned int* pendingMode);

#ifdef __cplusplus
} /* extern "C" */

#include <cstddef>
static_assert(sizeof(nvmlDevice_t) == 8);
static_assert(sizeof(nvmlReturn_t) == 4);
static_assert(sizeof(nvmlValue_t) == 8 && alignof(nvmlValue_t) == 8);
static_assert(sizeof(nvmlFieldValue_t) == 40 && alignof(nvmlFieldValue_t) == 8);
static_assert(offsetof(nvmlFieldValue_t, fieldId) == 0);
static_assert(offsetof(nvmlFieldValue_t, scopeId) == 4);
static_assert(offsetof(nvmlFieldValue_t, timestamp) == 8);
static_assert(offsetof(nvmlFieldValue_t, latencyUsec) == 16);
static_assert(offsetof(nvmlFieldValue_t, valueType) == 24);
static_assert(offsetof(nvmlFieldValue_t, nvmlReturn) == 28);
static_assert(offsetof(nvmlFieldValue_t, value) == 32);
static_assert(sizeof(nvmlPciInfo_t) == 68 && alignof(nvmlPciInfo_t) == 4);
static_assert(offsetof(nvmlPciInfo_t, domain) == 16);
static_assert(offsetof(nvmlPciInfo_t, bus) == 20);
static_assert(offsetof(nvmlPciInfo_t, device) == 24);
static_assert(offsetof(nvmlPciInfo_t, pciDeviceId) == 28);
static_assert(offsetof(nvmlPciInfo_t, pciSubSystemId) == 32);
static_assert(offsetof(nvmlPciInfo_t, busId) == 36);
static_assert(sizeof(nvmlTemperature_t) == 12);
static_assert(offsetof(nvmlTemperature_t, temperature) == 8);
static_assert(sizeof(nvmlPowerScopeType_t) == 1);
static_assert(sizeof(nvmlProcessInfo_t) == 24 && alignof(nvmlProcessInfo_t) == 8);
static_assert(offsetof(nvmlProcessInfo_t, pid) == 0);
static_assert(offsetof(nvmlProcessInfo_t, usedGpuMemory) == 8);
static_assert(offsetof(nvmlProcessInfo_t, gpuInstanceId) == 16);
static_assert(offsetof(nvmlProcessInfo_t, computeInstanceId) == 20);
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32 && alignof(nvmlProcessUtilizationSample_t) == 8);
static_assert(offsetof(nvmlProcessUtilizationSample_t, pid) == 0);
static_assert(offsetof(nvmlProcessUtilizationSample_t, timeStamp) == 8);
static_assert(offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16);
static_assert(offsetof(nvmlProcessUtilizationSample_t, memUtil) == 20);
static_assert(offsetof(nvmlProcessUtilizationSample_t, encUtil) == 24);
static_assert(offsetof(nvmlProcessUtilizationSample_t, decUtil) == 28);
static_assert(nvmlTemperature_v1 == ((unsigned)sizeof(nvmlTemperature_t) | (1u << 24)));
#endif

#endif /* ERG_BACKENDS_NVML_NVML_ABI_H_ */
