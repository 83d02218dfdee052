# PostgreSQL (Debian libpqxx-dev), option SQLGUARD_WITH_POSTGRESQL (AUTO/ON/OFF,
# cmake/sqlguard_feature.cmake). Not built: missing.cpp registers the dialect
# with an open() that throws not_supported naming the option.
sqlguard_feature(SQLGUARD_WITH_POSTGRESQL "Build the PostgreSQL dialect (needs libpqxx-dev)")
set(_sg_found FALSE)
if(SQLGUARD_WITH_POSTGRESQL_WANTED AND PkgConfig_FOUND)
  pkg_check_modules(PQXX IMPORTED_TARGET libpqxx)
  set(_sg_found ${PQXX_FOUND})
endif()
sqlguard_feature_resolve(SQLGUARD_WITH_POSTGRESQL postgresql "${_sg_found}" "libpqxx-dev (pkg-config libpqxx)")
if(SQLGUARD_WITH_POSTGRESQL)
  target_sources(sqlguard PRIVATE src/dialect/postgresql/connection.cpp src/dialect/postgresql/errors.cpp
    src/dialect/postgresql/factory.cpp src/dialect/postgresql/doctor.cpp)
  target_link_libraries(sqlguard PRIVATE PkgConfig::PQXX)
  list(APPEND SQLGUARD_PC_LIBS_PRIVATE -lpqxx -lpq)
else()
  target_sources(sqlguard PRIVATE src/dialect/postgresql/missing.cpp)
  list(APPEND SQLGUARD_HEADERS_NOT_BUILT postgresql.h postgres.h)  # its escape hatch is not installed
endif()
