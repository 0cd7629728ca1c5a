/* erg's own declarations of the AMD SMI C ABI subset it uses (libamd_smi.so, ROCm >= 6.3;
 * x86-64 Linux, LP64).
 *
 * No vendor header is needed: symbol names, enum values and struct layouts follow
 * shared/reference/vendor-abi.md Part 2 (ABI 24 compiled from amdsmi.h 24.7.0; ABI 25 and 26
 * from the documented field lists), and the static_asserts at the bottom pin every layout byte
 * for byte. Both the AMD SMI backend (through dlsym) and the simulated libamd_smi.so (which
 * exports these symbols) use this file.
 *
 * The symbols are plain C names with no version suffix; the ABI is told by the library version
 * (amdsmi_get_lib_version): its first 32-bit word is the year (24, 25) on ABI 24/25 and the
 * major (26) on ABI 26, so that word names the ABI in every case. Only amdsmi_power_info_t and
 * amdsmi_version_t differ between the ABIs erg supports (vendor-abi.md §2.6).
 *
 * Units at this boundary: socket power W (uint32, N/A = 0xFFFF or UINT32_MAX), power caps µW
 * (uint64), energy = uint64 count × float resolution in µJ (15.3 hard-coded by the library),
 * timestamps ns, clocks MHz, temperature °C (int64; the header comment of ABI 24 says
 * millidegrees, the implementation returns degrees). */
#ifndef ERG_BACKENDS_AMDSMI_AMDSMI_ABI_H_
#define ERG_BACKENDS_AMDSMI_AMDSMI_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void* amdsmi_processor_handle;
typedef void* amdsmi_socket_handle;

/* 32-bit; holds 0xFFFFFFFF. */
typedef enum {
  AMDSMI_STATUS_SUCCESS = 0,
  AMDSMI_STATUS_INVAL = 1,
  AMDSMI_STATUS_NOT_SUPPORTED = 2,
  AMDSMI_STATUS_NOT_YET_IMPLEMENTED = 3,
  AMDSMI_STATUS_FAIL_LOAD_MODULE = 4,
  AMDSMI_STATUS_FAIL_LOAD_SYMBOL = 5,
  AMDSMI_STATUS_DRM_ERROR = 6,
  AMDSMI_STATUS_API_FAILED = 7,
  AMDSMI_STATUS_TIMEOUT = 8,
  AMDSMI_STATUS_RETRY = 9,
  AMDSMI_STATUS_NO_PERM = 10,
  AMDSMI_STATUS_INTERRUPT = 11,
  AMDSMI_STATUS_IO = 12,
  AMDSMI_STATUS_ADDRESS_FAULT = 13,
  AMDSMI_STATUS_FILE_ERROR = 14,
  AMDSMI_STATUS_OUT_OF_RESOURCES = 15,
  AMDSMI_STATUS_INTERNAL_EXCEPTION = 16,
  AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS = 17,
  AMDSMI_STATUS_INIT_ERROR = 18,
  AMDSMI_STATUS_REFCOUNT_OVERFLOW = 19,
  AMDSMI_STATUS_DIRECTORY_NOT_FOUND = 20, /* ABI 26.1 */
  AMDSMI_STATUS_BUSY = 30,
  AMDSMI_STATUS_NOT_FOUND = 31,
  AMDSMI_STATUS_NOT_INIT = 32,
  AMDSMI_STATUS_NO_SLOT = 33,
  AMDSMI_STATUS_DRIVER_NOT_LOADED = 34,
  AMDSMI_STATUS_MORE_DATA = 39, /* ABI 26.1 */
  AMDSMI_STATUS_NO_DATA = 40,
  AMDSMI_STATUS_INSUFFICIENT_SIZE = 41,
  AMDSMI_STATUS_UNEXPECTED_SIZE = 42,
  AMDSMI_STATUS_UNEXPECTED_DATA = 43,
  AMDSMI_STATUS_NON_AMD_CPU = 44,
  AMDSMI_STATUS_NO_ENERGY_DRV = 45,
  AMDSMI_STATUS_NO_MSR_DRV = 46,
  AMDSMI_STATUS_NO_HSMP_DRV = 47,
  AMDSMI_STATUS_NO_HSMP_SUP = 48,
  AMDSMI_STATUS_NO_HSMP_MSG_SUP = 49,
  AMDSMI_STATUS_HSMP_TIMEOUT = 50,
  AMDSMI_STATUS_NO_DRV = 51,
  AMDSMI_STATUS_FILE_NOT_FOUND = 52,
  AMDSMI_STATUS_ARG_PTR_NULL = 53,
  AMDSMI_STATUS_AMDGPU_RESTART_ERR = 54,
  AMDSMI_STATUS_SETTING_UNAVAILABLE = 55,
  AMDSMI_STATUS_CORRUPTED_EEPROM = 56, /* ABI 26.1 */
  AMDSMI_STATUS_MAP_ERROR = (int)0xFFFFFFFE,
  AMDSMI_STATUS_UNKNOWN_ERROR = (int)0xFFFFFFFF
} amdsmi_status_t;

/* Passed to amdsmi_init as uint64_t. */
#define AMDSMI_INIT_AMD_CPUS 1ULL
#define AMDSMI_INIT_AMD_GPUS 2ULL
#define AMDSMI_INIT_NON_AMD_CPUS 4ULL
#define AMDSMI_INIT_NON_AMD_GPUS 8ULL

typedef enum {
  AMDSMI_CLK_TYPE_SYS = 0, /* = GFX */
  AMDSMI_CLK_TYPE_DF = 1,
  AMDSMI_CLK_TYPE_DCEF = 2,
  AMDSMI_CLK_TYPE_SOC = 3,
  AMDSMI_CLK_TYPE_MEM = 4,
  AMDSMI_CLK_TYPE_PCIE = 5
} amdsmi_clk_type_t;
#define AMDSMI_CLK_TYPE_GFX AMDSMI_CLK_TYPE_SYS

typedef enum { CLK_LIMIT_MIN = 0, CLK_LIMIT_MAX = 1 } amdsmi_clk_limit_type_t;

typedef enum {
  AMDSMI_DEV_PERF_LEVEL_AUTO = 0,
  AMDSMI_DEV_PERF_LEVEL_LOW = 1,
  AMDSMI_DEV_PERF_LEVEL_HIGH = 2,
  AMDSMI_DEV_PERF_LEVEL_MANUAL = 3,
  AMDSMI_DEV_PERF_LEVEL_STABLE_STD = 4,
  AMDSMI_DEV_PERF_LEVEL_STABLE_PEAK = 5,
  AMDSMI_DEV_PERF_LEVEL_STABLE_MIN_MCLK = 6,
  AMDSMI_DEV_PERF_LEVEL_STABLE_MIN_SCLK = 7,
  AMDSMI_DEV_PERF_LEVEL_DETERMINISM = 8,
  AMDSMI_DEV_PERF_LEVEL_UNKNOWN = 0x100
} amdsmi_dev_perf_level_t;

typedef enum {
  AMDSMI_TEMPERATURE_TYPE_EDGE = 0,
  AMDSMI_TEMPERATURE_TYPE_HOTSPOT = 1, /* = JUNCTION */
  AMDSMI_TEMPERATURE_TYPE_VRAM = 2,
  AMDSMI_TEMPERATURE_TYPE_HBM_0 = 3,
  AMDSMI_TEMPERATURE_TYPE_PLX = 7
} amdsmi_temperature_type_t;

typedef enum { AMDSMI_TEMP_CURRENT = 0, AMDSMI_TEMP_MAX = 1, AMDSMI_TEMP_CRITICAL = 5 } amdsmi_temperature_metric_t;

/* The "not available" values of amdsmi_power_info_t's socket power fields: 24.7 pre-fills the
 * gpu_metrics u16 sentinel, the 26.x headers say UINT32_MAX (vendor-abi.md §2.5). */
#define ERG_AMDSMI_NA_U16 0xFFFFu
#define ERG_AMDSMI_NA_U32 0xFFFFFFFFu

/* amdsmi_power_info_t, ABI 24 (68 B, align 4). W; voltages mV. */
typedef struct {
  uint32_t current_socket_power; /* MI300 and newer */
  uint32_t average_socket_power; /* Navi, MI200 and older */
  uint32_t gfx_voltage;
  uint32_t soc_voltage;
  uint32_t mem_voltage;
  uint32_t power_limit; /* unreliable unit (vendor-abi.md §2.3): not used */
  uint32_t reserved[11];
} erg_amdsmi_power_info_v24_t;

/* amdsmi_power_info_t, ABI 25 (40 B, align 8). */
typedef struct {
  uint64_t socket_power; /* host builds only */
  uint32_t current_socket_power;
  uint32_t average_socket_power;
  uint32_t gfx_voltage;
  uint32_t soc_voltage;
  uint32_t mem_voltage;
  uint32_t power_limit;
  uint32_t reserved[2];
} erg_amdsmi_power_info_v25_t;

/* amdsmi_power_info_t, ABI 26 (192 B, align 8). */
typedef struct {
  uint64_t socket_power;
  uint32_t current_socket_power;
  uint32_t average_socket_power;
  uint64_t gfx_voltage;
  uint64_t soc_voltage;
  uint64_t mem_voltage;
  uint32_t power_limit;
  uint32_t pad_or_ubb_power; /* padding in 26.1; `ubb_power` in later headers */
  uint64_t reserved[18];
} erg_amdsmi_power_info_v26_t;

/* Largest of the three: what erg passes, so a library of any supported ABI stays in bounds. */
typedef union {
  erg_amdsmi_power_info_v24_t v24;
  erg_amdsmi_power_info_v25_t v25;
  erg_amdsmi_power_info_v26_t v26;
} erg_amdsmi_power_info_any_t;

/* amdsmi_power_cap_info_t (every ABI, 64 B). µW; dpm_cap MHz. */
typedef struct {
  uint64_t power_cap;
  uint64_t default_power_cap;
  uint64_t dpm_cap;
  uint64_t min_power_cap;
  uint64_t max_power_cap;
  uint64_t reserved[3];
} amdsmi_power_cap_info_t;

/* amdsmi_asic_info_t: only market_name at offset 0 is read. 456 B on ABI 24, 896 B on 25/26;
 * callers pass a buffer of kAsicInfoBufferSize. */
#define ERG_AMDSMI_MARKET_NAME_SIZE 256
#define ERG_AMDSMI_ASIC_INFO_BUFFER_SIZE 1024

/* amdsmi_kfd_info_t (every ABI, 64 B). */
typedef struct {
  uint64_t kfd_id;
  uint32_t node_id; /* HIP order on ROCm 6.3 */
  uint32_t current_partition_id;
  uint32_t reserved[12];
} amdsmi_kfd_info_t;

/* amdsmi_clk_info_t (every ABI, 32 B). MHz. */
typedef struct {
  uint32_t clk;
  uint32_t min_clk;
  uint32_t max_clk;
  uint8_t clk_locked;
  uint8_t clk_deep_sleep;
  uint32_t reserved[4];
} amdsmi_clk_info_t;

/* amdsmi_bdf_t: one uint64_t. function bits 0-2, device 3-7, bus 8-15, domain 16-63. */
typedef union {
  uint64_t as_uint;
} amdsmi_bdf_t;

/* amdsmi_version_t, ABI 24/25 (24 B): the first word is the year. */
typedef struct {
  uint32_t year;
  uint32_t major;
  uint32_t minor;
  uint32_t release;
  const char* build;
} erg_amdsmi_version_v24_t;

/* amdsmi_version_t, ABI 26 (24 B): no year. */
typedef struct {
  uint32_t major;
  uint32_t minor;
  uint32_t release;
  const char* build;
} erg_amdsmi_version_v26_t;

/* Function pointer types, one per symbol erg resolves. */
typedef amdsmi_status_t (*amdsmi_init_fn)(uint64_t init_flags);
typedef amdsmi_status_t (*amdsmi_shut_down_fn)(void);
typedef amdsmi_status_t (*amdsmi_get_lib_version_fn)(void* version);
typedef amdsmi_status_t (*amdsmi_status_code_to_string_fn)(amdsmi_status_t status, const char** status_string);
typedef amdsmi_status_t (*amdsmi_get_socket_handles_fn)(uint32_t* socket_count, amdsmi_socket_handle* socket_handles);
typedef amdsmi_status_t (*amdsmi_get_processor_handles_fn)(amdsmi_socket_handle socket_handle,
                                                           uint32_t* processor_count,
                                                           amdsmi_processor_handle* processor_handles);
typedef amdsmi_status_t (*amdsmi_get_gpu_asic_info_fn)(amdsmi_processor_handle h, void* info);
typedef amdsmi_status_t (*amdsmi_get_gpu_kfd_info_fn)(amdsmi_processor_handle h, amdsmi_kfd_info_t* info);
typedef amdsmi_status_t (*amdsmi_get_gpu_device_bdf_fn)(amdsmi_processor_handle h, amdsmi_bdf_t* bdf);
typedef amdsmi_status_t (*amdsmi_get_power_cap_info_fn)(amdsmi_processor_handle h, uint32_t sensor_ind,
                                                        amdsmi_power_cap_info_t* info);
typedef amdsmi_status_t (*amdsmi_set_power_cap_fn)(amdsmi_processor_handle h, uint32_t sensor_ind, uint64_t cap);
typedef amdsmi_status_t (*amdsmi_get_power_info_fn)(amdsmi_processor_handle h, void* info);
typedef amdsmi_status_t (*amdsmi_get_energy_count_fn)(amdsmi_processor_handle h, uint64_t* energy_accumulator,
                                                      float* counter_resolution, uint64_t* timestamp);
typedef amdsmi_status_t (*amdsmi_get_clock_info_fn)(amdsmi_processor_handle h, amdsmi_clk_type_t clk_type,
                                                    amdsmi_clk_info_t* info);
typedef amdsmi_status_t (*amdsmi_set_gpu_clk_limit_fn)(amdsmi_processor_handle h, amdsmi_clk_type_t clk_type,
                                                       amdsmi_clk_limit_type_t limit_type, uint64_t clk_value);
typedef amdsmi_status_t (*amdsmi_set_gpu_perf_level_fn)(amdsmi_processor_handle h, amdsmi_dev_perf_level_t perf_lvl);
typedef amdsmi_status_t (*amdsmi_get_temp_metric_fn)(amdsmi_processor_handle h, amdsmi_temperature_type_t sensor_type,
                                                     amdsmi_temperature_metric_t metric, int64_t* temperature);

#ifdef __cplusplus
} /* extern "C" */

#include <cstddef>

/* The layouts of vendor-abi.md §2.3, byte for byte. */
static_assert(sizeof(amdsmi_status_t) == 4);
static_assert(sizeof(erg_amdsmi_power_info_v24_t) == 68 && alignof(erg_amdsmi_power_info_v24_t) == 4);
static_assert(offsetof(erg_amdsmi_power_info_v24_t, current_socket_power) == 0);
static_assert(offsetof(erg_amdsmi_power_info_v24_t, average_socket_power) == 4);
static_assert(offsetof(erg_amdsmi_power_info_v24_t, power_limit) == 20);
static_assert(sizeof(erg_amdsmi_power_info_v25_t) == 40 && alignof(erg_amdsmi_power_info_v25_t) == 8);
static_assert(offsetof(erg_amdsmi_power_info_v25_t, current_socket_power) == 8);
static_assert(offsetof(erg_amdsmi_power_info_v25_t, average_socket_power) == 12);
static_assert(offsetof(erg_amdsmi_power_info_v25_t, power_limit) == 28);
static_assert(sizeof(erg_amdsmi_power_info_v26_t) == 192 && alignof(erg_amdsmi_power_info_v26_t) == 8);
static_assert(offsetof(erg_amdsmi_power_info_v26_t, current_socket_power) == 8);
static_assert(offsetof(erg_amdsmi_power_info_v26_t, average_socket_power) == 12);
static_assert(offsetof(erg_amdsmi_power_info_v26_t, gfx_voltage) == 16);
static_assert(offsetof(erg_amdsmi_power_info_v26_t, power_limit) == 40);
static_assert(offsetof(erg_amdsmi_power_info_v26_t, reserved) == 48);
static_assert(sizeof(amdsmi_power_cap_info_t) == 64);
static_assert(offsetof(amdsmi_power_cap_info_t, min_power_cap) == 24);
static_assert(offsetof(amdsmi_power_cap_info_t, max_power_cap) == 32);
static_assert(sizeof(amdsmi_kfd_info_t) == 64 && offsetof(amdsmi_kfd_info_t, node_id) == 8);
static_assert(sizeof(amdsmi_clk_info_t) == 32 && offsetof(amdsmi_clk_info_t, clk_locked) == 12 &&
              offsetof(amdsmi_clk_info_t, reserved) == 16);
static_assert(sizeof(amdsmi_bdf_t) == 8);
static_assert(sizeof(erg_amdsmi_version_v24_t) == 24 && offsetof(erg_amdsmi_version_v24_t, major) == 4 &&
              offsetof(erg_amdsmi_version_v24_t, build) == 16);
static_assert(sizeof(erg_amdsmi_version_v26_t) == 24 && offsetof(erg_amdsmi_version_v26_t, major) == 0 &&
              offsetof(erg_amdsmi_version_v26_t, build) == 16);
static_assert(AMDSMI_STATUS_NOT_INIT == 32 && AMDSMI_STATUS_ARG_PTR_NULL == 53);
static_assert(AMDSMI_CLK_TYPE_MEM == 4 && AMDSMI_DEV_PERF_LEVEL_UNKNOWN == 0x100);
#endif

#endif /* ERG_BACKENDS_AMDSMI_AMDSMI_ABI_H_ */
