# Debian packages (docs/install.md): `cpack -G DEB` in the build directory
# makes, from the install components,
#   libsqlguard0                runtime: libsqlguard.so.0
#   libsqlguard-prometheus0     prometheus: libsqlguard_prometheus.so.0 (when built)
#   libsqlguard-dev             dev: headers, the .so links, CMake package, pkg-config file
#   sqlguard                    cli: the sqlguard command-line tool and its man page (when SQLGUARD_BUILD_TOOLS)
#   sqlguard-bench-comparators  comparators: `sqlguard bench --redis/--etcd` (when hiredis or cpp-httplib is found)
# and a -dbgsym .ddeb for each package with ELF files: the packages' binaries
# are stripped, their debug information (RelWithDebInfo) is in the .ddeb.
# Make them with tools/packages.sh BUILD_DIR OUT_DIR: cpack -G DEB plus what
# CMake 3.25's CPackDeb does not do as Debian's own tools do.
# Depends come from dpkg-shlibdeps on what was really linked, so a build
# without PostgreSQL does not depend on libpqxx (and so on per dialect), and
# a host that installs only `sqlguard` gets neither prometheus-cpp nor the
# comparators' hiredis and cpp-httplib. Every package carries the copyright
# file and a Debian changelog; tests/deb/run.sh checks them with lintian.
set(SQLGUARD_PACKAGE_CONTACT "sqlguard maintainers <maintainers@sqlguard.example.org>" CACHE STRING
  "Maintainer of the Debian packages (cpack -G DEB)")
set(CPACK_PACKAGE_NAME sqlguard)
set(CPACK_PACKAGE_VENDOR "sqlguard")
# Each package's description below starts with its own synopsis line: CPack
# prepends the summary unless it is CPack's default text, so it is that.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "${SQLGUARD_PACKAGE_CONTACT}")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_BINARY_DIR}/packages")

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
# component -> package
set(_sg_packages runtime:libsqlguard0 dev:libsqlguard-dev)
if(SQLGUARD_WITH_PROMETHEUS)
  list(APPEND CPACK_COMPONENTS_ALL prometheus)
  list(APPEND _sg_packages prometheus:libsqlguard-prometheus0)
endif()
if(TARGET sqlguard_cli)
  list(APPEND CPACK_COMPONENTS_ALL cli)
  list(APPEND _sg_packages cli:sqlguard)
endif()
if(TARGET sqlguard_bench_comparators)
  list(APPEND CPACK_COMPONENTS_ALL comparators)
  list(APPEND _sg_packages comparators:sqlguard-bench-comparators)
endif()
# The package names, for tests/deb/run.sh.
set(SQLGUARD_DEB_PACKAGES "")
foreach(_sg_pair IN LISTS _sg_packages)
  string(REGEX REPLACE "^[^:]*:" "" _sg_pkg "${_sg_pair}")
  list(APPEND SQLGUARD_DEB_PACKAGES ${_sg_pkg})
endforeach()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Stripped binaries; the debug information goes to <package>-dbgsym .ddebs.
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
# The CLI links libsqlguard.so.0 of the runtime package: let dpkg-shlibdeps
# find it in the build tree (its Depends on libsqlguard0 comes from the
# component dependency below).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${PROJECT_BINARY_DIR}")
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

# Per package: /usr/share/doc/<package>/copyright and changelog.Debian.gz
# (gzip -9n: no timestamp, as lintian wants).
set(SQLGUARD_DEB_VERSION "${CPACK_PACKAGE_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")
configure_file(cmake/debian/changelog.in "${PROJECT_BINARY_DIR}/debian/changelog.Debian" @ONLY)
execute_process(COMMAND gzip -9nc "${PROJECT_BINARY_DIR}/debian/changelog.Debian"
  OUTPUT_FILE "${PROJECT_BINARY_DIR}/debian/changelog.Debian.gz" RESULT_VARIABLE _sg_gzip)
if(NOT _sg_gzip EQUAL 0)
  message(FATAL_ERROR "gzip of the Debian changelog failed (${_sg_gzip})")
endif()
foreach(_sg_pair IN LISTS _sg_packages)
  string(REPLACE ":" ";" _sg_pair "${_sg_pair}")
  list(GET _sg_pair 0 _sg_comp)
  list(GET _sg_pair 1 _sg_pkg)
  install(FILES cmake/debian/copyright "${PROJECT_BINARY_DIR}/debian/changelog.Debian.gz"
    DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${_sg_pkg} COMPONENT ${_sg_comp})
endforeach()

set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "cross-process locks and idempotency on your SQL database
sqlguard's library: leases, row locks, version CAS, state transitions,
idempotency keys and an inbox on SQLite, PostgreSQL or MySQL/MariaDB,
without Redis or ZooKeeper.
Built with: ${SQLGUARD_PC_COMPONENTS}.")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libsqlguard0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # a shlibs file for the library packages
# ldconfig by trigger, as dh_makeshlibs does (lintian: lacks-ldconfig-trigger);
# tools/packages.sh drops the postinst/postrm that CPack 3.25 writes to call
# ldconfig (lintian: maintscript-calls-ldconfig).
set(_sg_ldconfig "${PROJECT_SOURCE_DIR}/cmake/debian/triggers")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${_sg_ldconfig})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_COMPONENT_PROMETHEUS_DESCRIPTION "Prometheus exporter of sqlguard's metrics
sqlguard::prometheus (sqlguard/prometheus.h): the lock client's and the
strategies' metrics as prometheus-cpp collectors.")
set(CPACK_COMPONENT_PROMETHEUS_DEPENDS runtime)
set(CPACK_DEBIAN_PROMETHEUS_PACKAGE_NAME libsqlguard-prometheus0)
set(CPACK_DEBIAN_PROMETHEUS_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PROMETHEUS_PACKAGE_CONTROL_EXTRA ${_sg_ldconfig})
set(CPACK_DEBIAN_PROMETHEUS_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_COMPONENT_DEV_DESCRIPTION "cross-process locks and idempotency on SQL - development files
Headers, the CMake package (find_package(sqlguard)) and the pkg-config file
of libsqlguard. Components built: ${SQLGUARD_PC_COMPONENTS}.")
# The CMake package names every library built (sqlguard::prometheus too).
set(CPACK_COMPONENT_DEV_DEPENDS runtime)
if(SQLGUARD_WITH_PROMETHEUS)
  list(APPEND CPACK_COMPONENT_DEV_DEPENDS prometheus)
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libsqlguard-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF)
install(FILES cmake/debian/libsqlguard-dev.lintian-overrides RENAME libsqlguard-dev
  DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides COMPONENT dev)
# The native escape hatches (sqlguard/postgresql.h, ...) need the driver's
# own headers; everything else needs only a C++20 compiler.
set(_sg_suggests "")
if(SQLGUARD_WITH_SQLITE)
  list(APPEND _sg_suggests libsqlite3-dev)
endif()
if(SQLGUARD_WITH_POSTGRESQL)
  list(APPEND _sg_suggests libpqxx-dev)
endif()
if(SQLGUARD_WITH_MYSQL)
  list(APPEND _sg_suggests libmysqlcppconn-dev)
endif()
if(SQLGUARD_WITH_PROMETHEUS)
  list(APPEND _sg_suggests prometheus-cpp-dev)
endif()
list(JOIN _sg_suggests ", " CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS)

set(CPACK_COMPONENT_CLI_DESCRIPTION "command-line tool of sqlguard's locks, migrations and checks
sqlguard migrate, doctor, lock, run, elect, cleanup, bench and chaos on
SQLite, PostgreSQL or MySQL/MariaDB.
Built with: ${SQLGUARD_PC_COMPONENTS}.")
set(CPACK_COMPONENT_CLI_DEPENDS runtime)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME sqlguard)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION database)
if(TARGET sqlguard_bench_comparators)
  set(CPACK_DEBIAN_CLI_PACKAGE_SUGGESTS sqlguard-bench-comparators)
endif()

set(CPACK_COMPONENT_COMPARATORS_DESCRIPTION "Redis and etcd comparators for sqlguard bench
The module sqlguard bench loads for --redis (SET NX PX and a Lua release)
and --etcd (etcd's lock service): the same lock loops run on those services
beside the database, for ratios in one run.")
set(CPACK_COMPONENT_COMPARATORS_DEPENDS cli)
set(CPACK_DEBIAN_COMPARATORS_PACKAGE_NAME sqlguard-bench-comparators)
set(CPACK_DEBIAN_COMPARATORS_PACKAGE_SECTION database)

include(CPack)
