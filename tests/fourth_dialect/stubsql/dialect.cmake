# stubsql (tests/fourth_dialect/run.sh): SQLite's engine under a new name.
if(SQLGUARD_WITH_SQLITE)
  target_sources(sqlguard PRIVATE src/dialect/stubsql/factory.cpp)
endif()
