# MySQL / MariaDB (Debian libmysqlcppconn-dev 1.1): compiled in when found.
find_path(MYSQLCPPCONN_INCLUDE_DIR mysql_driver.h)
find_library(MYSQLCPPCONN_LIBRARY mysqlcppconn)
find_package(Boost QUIET)  # mysqlcppconn 1.1 headers include boost/shared_ptr.hpp
set(SQLGUARD_WITH_MYSQL OFF)
if(MYSQLCPPCONN_INCLUDE_DIR AND MYSQLCPPCONN_LIBRARY AND Boost_FOUND)
  set(SQLGUARD_WITH_MYSQL ON)
endif()
if(SQLGUARD_WITH_MYSQL)
  target_sources(sqlguard PRIVATE src/dialect/mysql/connection.cpp src/dialect/mysql/errors.cpp
    src/dialect/mysql/factory.cpp src/dialect/mysql/doctor.cpp src/dialect/mysql/galera_checks.cpp)
  target_include_directories(sqlguard SYSTEM PRIVATE ${MYSQLCPPCONN_INCLUDE_DIR} ${Boost_INCLUDE_DIRS})
  target_link_libraries(sqlguard PRIVATE ${MYSQLCPPCONN_LIBRARY})
else()
  target_sources(sqlguard PRIVATE src/dialect/mysql/missing.cpp)
endif()
