# SQLite (Debian libsqlite3-dev): compiled in when found; included by the
# top-level CMakeLists.txt like every src/dialect/<name>/dialect.cmake.
find_package(SQLite3)
set(SQLGUARD_WITH_SQLITE ${SQLite3_FOUND})
if(SQLGUARD_WITH_SQLITE)
  target_sources(sqlguard PRIVATE src/dialect/sqlite/connection.cpp src/dialect/sqlite/errors.cpp
    src/dialect/sqlite/factory.cpp src/dialect/sqlite/doctor.cpp)
  target_link_libraries(sqlguard PRIVATE SQLite::SQLite3)
else()
  target_sources(sqlguard PRIVATE src/dialect/sqlite/missing.cpp)
endif()
