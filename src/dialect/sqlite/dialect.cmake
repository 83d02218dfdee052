# SQLite (Debian libsqlite3-dev), option SQLGUARD_WITH_SQLITE (AUTO/ON/OFF,
# cmake/sqlguard_feature.cmake); included by the top-level CMakeLists.txt like
# every src/dialect/<name>/dialect.cmake. Not built: missing.cpp registers the
# dialect with an open() that throws not_supported naming the option.
sqlguard_feature(SQLGUARD_WITH_SQLITE "Build the SQLite dialect (needs libsqlite3-dev)")
set(_sg_found FALSE)
if(SQLGUARD_WITH_SQLITE_WANTED)
  find_package(SQLite3)
  set(_sg_found ${SQLite3_FOUND})
endif()
sqlguard_feature_resolve(SQLGUARD_WITH_SQLITE sqlite "${_sg_found}" "libsqlite3-dev (CMake FindSQLite3)")
if(SQLGUARD_WITH_SQLITE)
  target_sources(sqlguard PRIVATE src/dialect/sqlite/connection.cpp src/dialect/sqlite/errors.cpp
    src/dialect/sqlite/factory.cpp src/dialect/sqlite/doctor.cpp)
  target_link_libraries(sqlguard PRIVATE SQLite::SQLite3)
  list(APPEND SQLGUARD_PC_LIBS_PRIVATE -lsqlite3)
else()
  target_sources(sqlguard PRIVATE src/dialect/sqlite/missing.cpp)
  list(APPEND SQLGUARD_HEADERS_NOT_BUILT sqlite.h)  # its escape hatch is not installed
endif()
