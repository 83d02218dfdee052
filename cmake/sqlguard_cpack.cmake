# Debian packages (docs/install.md): `cpack -G DEB` in the build directory
# makes, from the install components,
#   libsqlguard0     runtime: libsqlguard.so.0 (+ libsqlguard_prometheus.so.0 when built)
#   libsqlguard-dev  dev: headers, the .so links, CMake package, pkg-config file
#   sqlguard         cli: the sqlguard command-line tool (when SQLGUARD_BUILD_TOOLS)
# Depends come from dpkg-shlibdeps on what was really linked, so a build
# without PostgreSQL does not depend on libpqxx (and so on per dialect).
set(CPACK_PACKAGE_NAME sqlguard)
set(CPACK_PACKAGE_VENDOR "sqlguard")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "sqlguard maintainers <sqlguard@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_BINARY_DIR}/packages")

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
if(TARGET sqlguard_cli)
  list(APPEND CPACK_COMPONENTS_ALL cli)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The CLI links libsqlguard.so.0 of the runtime package: let dpkg-shlibdeps
# find it in the build tree (its Depends on libsqlguard0 comes from the
# component dependency below).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${PROJECT_BINARY_DIR}")
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "sqlguard: cross-process locks and idempotency on your SQL database (runtime)
 Leases, row locks, version CAS, state transitions, idempotency keys and an
 inbox on SQLite, PostgreSQL or MySQL/MariaDB. Built with: ${SQLGUARD_PC_COMPONENTS}.")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libsqlguard0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # a shlibs file for libsqlguard0 (+ ldconfig in postinst)

set(CPACK_COMPONENT_DEV_DESCRIPTION "sqlguard: development files
 Headers, the CMake package (find_package(sqlguard)) and the pkg-config file
 of libsqlguard. Components built: ${SQLGUARD_PC_COMPONENTS}.")
set(CPACK_COMPONENT_DEV_DEPENDS runtime)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libsqlguard-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF)
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

set(CPACK_COMPONENT_CLI_DESCRIPTION "sqlguard: command-line tool
 sqlguard migrate, doctor, lock, run, bench and chaos on SQLite, PostgreSQL or
 MySQL/MariaDB (those built: ${SQLGUARD_PC_COMPONENTS}).")
set(CPACK_COMPONENT_CLI_DEPENDS runtime)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME sqlguard)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION database)

include(CPack)
