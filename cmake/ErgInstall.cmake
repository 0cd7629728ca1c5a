# Install rules and the CMake package `erg` (find_package(erg) gives erg::core, erg::measure,
# erg::devices, ...), plus a pkg-config file `erg.pc`. Included last by the top-level
# CMakeLists, once every component's targets exist.
include(CMakePackageConfigHelpers)

# Library target -> the name it has in the package (erg::<name>).
set(ERG_EXPORTED
  erg_core:core erg_nvml:nvml erg_amdsmi:amdsmi erg_rapl:rapl erg_jetson:jetson erg_backends:backends erg_measure:measure
  erg_sim_engine:sim_engine erg_sim_tree:sim_tree erg_sim:sim
  erg_protocol:protocol erg_client_conn:client_conn erg_client_remote:client_remote
  erg_devices:devices erg_batch_size:batch_size erg_zeus_sim:zeus_sim erg_profile:profile
  erg_power_limit:power_limit erg_hetero:hetero erg_pipeline_frequency:pipeline_frequency)
set(ERG_INSTALL_TARGETS)
foreach(pair ${ERG_EXPORTED})
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 target)
  list(GET pair 1 name)
  if(TARGET ${target})
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
    # Components whose include directories are given for the build tree only.
    target_include_directories(${target} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    list(APPEND ERG_INSTALL_TARGETS ${target})
  endif()
endforeach()

install(TARGETS ${ERG_INSTALL_TARGETS} EXPORT ergTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(dir core backends backends/nvml backends/amdsmi backends/rapl measure sim protocol client devices
    optimizers/batch_size optimizers/zeus_sim optimizers/profile optimizers/power_limit optimizers/hetero
    optimizers/pipeline_frequency)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${dir}/include/erg)
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
            FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
  endif()
endforeach()

# The simulated driver, where sim::Machine::driver_library_path() looks for it in an install.
if(TARGET erg_sim_nvml)
  install(TARGETS erg_sim_nvml LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/erg/sim)
  if(TARGET erg_sim_amdsmi)
    install(TARGETS erg_sim_amdsmi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/erg/sim)
  endif()
  target_compile_definitions(erg_sim PRIVATE
    ERG_SIM_INSTALL_DRIVER_PATH="${CMAKE_INSTALL_FULL_LIBDIR}/erg/sim/libnvidia-ml.so.1")
endif()

install(EXPORT ergTargets NAMESPACE erg:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/erg)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ergConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ergConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/erg)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ergConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ergConfig.cmake ${PROJECT_BINARY_DIR}/ergConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/erg)

# pkg-config: the static libraries in link order (dependents first).
set(ERG_PC_LIBS)
foreach(target erg_pipeline_frequency erg_power_limit erg_profile erg_zeus_sim erg_batch_size erg_devices erg_client_remote erg_client_conn erg_protocol erg_backends erg_nvml erg_amdsmi erg_rapl erg_jetson
               erg_measure erg_sim erg_sim_tree erg_sim_engine erg_core)
  if(TARGET ${target})
    string(APPEND ERG_PC_LIBS " -l${target}")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/erg.pc.in ${PROJECT_BINARY_DIR}/erg.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/erg.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
