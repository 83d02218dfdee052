# An installed sqlguard is usable from any prefix. Installs the build tree
# into WORK_DIR/stage, MOVES it to WORK_DIR/moved/prefix (the install must be
# relocatable: no path of the original prefix may be needed), then configures,
# builds and runs three programs against it (tests/consumer/main.cpp: SQLite
# in memory, migrate, take and release a lease):
#   1. find_package(sqlguard) + sqlguard::sqlguard, compiled as C++23
#   2. find_package(sqlguard COMPONENTS prometheus) + sqlguard::prometheus
#      (when the exporter was built), and libsqlguard_prometheus resolves
#      libsqlguard through its own $ORIGIN RUNPATH
#   3. pkg-config --cflags --libs sqlguard with PKG_CONFIG_PATH in the prefix,
#      compiled as C++23 (the .pc file must not force -std=c++20)
# and checks that asking for a component that was not built fails clearly.
# Inputs: SQLGUARD_BUILD_DIR, CONSUMER_SOURCE_DIR, WORK_DIR, CXX, COMPONENTS.
cmake_minimum_required(VERSION 3.20)  # policies (IN_LIST)
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/moved")
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
endfunction()
function(expect_run name)  # runs a built consumer, checks its line, prints it
  run(${ARGN} ${name})
  string(STRIP "${last_out}" line)
  if(NOT line MATCHES "^${name}: C\\+\\+ ([0-9]+), applied [1-9][0-9]* migrations on sqlite, lease fence [1-9]")
    message(FATAL_ERROR "${name} printed: ${last_out}")
  endif()
  message(STATUS "${line}")
  set(cplusplus ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()

set(stage "${WORK_DIR}/stage")
set(prefix "${WORK_DIR}/moved/prefix")
run(${CMAKE_COMMAND} --install "${SQLGUARD_BUILD_DIR}" --prefix "${stage}")
file(RENAME "${stage}" "${prefix}")
message(STATUS "installed into ${stage}, moved to ${prefix}")

# No installed package file names the staging prefix or the build tree.
file(GLOB_RECURSE package_files "${prefix}/*.cmake" "${prefix}/*.pc")
foreach(f IN LISTS package_files)
  file(READ "${f}" text)
  foreach(bad "${stage}" "${SQLGUARD_BUILD_DIR}")
    string(FIND "${text}" "${bad}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} contains the absolute path ${bad}")
    endif()
  endforeach()
endforeach()

# 1. find_package, core, C++23.
run(${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/core" -DCONSUMER_MODE=core
    "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_COMPILER=${CXX}")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/core")
expect_run(find_package-core "${WORK_DIR}/core/consumer")
if(NOT cplusplus GREATER 202002)
  message(FATAL_ERROR "the find_package consumer asked for C++23 and got __cplusplus ${cplusplus}")
endif()

# 2. find_package with the prometheus component.
file(GLOB prom_lib "${prefix}/lib*/libsqlguard_prometheus.so.*.*" "${prefix}/lib/*/libsqlguard_prometheus.so.*.*")
if("prometheus" IN_LIST COMPONENTS)
  list(GET prom_lib 0 prom_lib)
  run(readelf -d "${prom_lib}")
  if(NOT last_out MATCHES "(RUNPATH|RPATH)[^\n]*\\[\\$ORIGIN\\]")
    message(FATAL_ERROR "${prom_lib} has no $ORIGIN run path:\n${last_out}")
  endif()
  run(ldd "${prom_lib}")  # resolved from the library's own run path, no LD_LIBRARY_PATH
  if(NOT last_out MATCHES "libsqlguard\\.so\\.0 => ${prefix}/")
    message(FATAL_ERROR "${prom_lib} does not find libsqlguard.so.0 beside it:\n${last_out}")
  endif()
  run(${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/prometheus" -DCONSUMER_MODE=prometheus
      "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_COMPILER=${CXX}")
  run(${CMAKE_COMMAND} --build "${WORK_DIR}/prometheus")
  expect_run(find_package-prometheus "${WORK_DIR}/prometheus/consumer")
else()
  if(prom_lib)
    message(FATAL_ERROR "prometheus was not built but ${prom_lib} is installed")
  endif()
  message(STATUS "find_package-prometheus: skipped (sqlguard built without the Prometheus exporter)")
endif()

# A component that was not built: find_package fails and names it.
set(missing nosuch)
foreach(c sqlite postgresql mysql prometheus)
  if(NOT c IN_LIST COMPONENTS)
    set(missing ${c})
    break()
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/missing" -DCONSUMER_MODE=missing
    -DCONSUMER_COMPONENT=${missing} "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_COMPILER=${CXX}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TOUPPER "${missing}" upper)
# CMake wraps a long message where a path makes it long: match on one line.
string(REGEX REPLACE "[ \t\r\n]+" " " err "${err}")
if(rc EQUAL 0 OR NOT err MATCHES "without the requested component\\(s\\): '${missing}'")
  message(FATAL_ERROR "find_package(sqlguard COMPONENTS ${missing}) did not fail clearly (${rc}):\n${out}\n${err}")
endif()
if(NOT missing STREQUAL "nosuch" AND NOT err MATCHES "SQLGUARD_WITH_${upper}=ON")
  message(FATAL_ERROR "find_package(sqlguard COMPONENTS ${missing}) does not name the build option:\n${err}")
endif()
string(REGEX REPLACE "[ \n]+" " " err_flat "${err}")
string(REGEX MATCH "sqlguard at .* it has: [a-z]+(, [a-z]+)*" why "${err_flat}")
message(STATUS "find_package(sqlguard REQUIRED COMPONENTS ${missing}) fails: ${why}")

# 3. pkg-config, C++23, rpath from the .pc file's own libdir.
find_program(PKG_CONFIG pkg-config REQUIRED)
file(GLOB_RECURSE pcs "${prefix}/*/sqlguard.pc")
list(GET pcs 0 pc)
get_filename_component(pcdir "${pc}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pcdir}")
run(${PKG_CONFIG} --cflags --libs sqlguard)
string(STRIP "${last_out}" flags)
message(STATUS "pkg-config --cflags --libs sqlguard: ${flags}")
if(flags MATCHES "-std=")
  message(FATAL_ERROR "pkg-config forces a C++ standard on consumers: ${flags}")
endif()
run(${PKG_CONFIG} --variable=libdir sqlguard)
string(STRIP "${last_out}" libdir)
if(NOT EXISTS "${libdir}/libsqlguard.so" OR NOT flags MATCHES "-I${prefix}/")
  message(FATAL_ERROR "pkg-config's paths are not in ${prefix}: ${flags}; libdir ${libdir}")
endif()
separate_arguments(flag_list UNIX_COMMAND "${flags}")
run(${CXX} -std=c++23 "${CONSUMER_SOURCE_DIR}/main.cpp" ${flag_list} "-Wl,-rpath,${libdir}"
    -o "${WORK_DIR}/consumer-pkg-config")
expect_run(pkg-config "${WORK_DIR}/consumer-pkg-config")
if(NOT cplusplus GREATER 202002)
  message(FATAL_ERROR "the pkg-config consumer asked for C++23 and got __cplusplus ${cplusplus}")
endif()
