# MySQL / MariaDB (Debian libmysqlcppconn-dev 1.1, whose headers need
# libboost-dev), option SQLGUARD_WITH_MYSQL (AUTO/ON/OFF,
# cmake/sqlguard_feature.cmake). Not built: missing.cpp registers the dialect
# with an open() that throws not_supported naming the option.
sqlguard_feature(SQLGUARD_WITH_MYSQL "Build the MySQL/MariaDB dialect (needs libmysqlcppconn-dev, libboost-dev)")
set(_sg_found FALSE)
if(SQLGUARD_WITH_MYSQL_WANTED)
  find_path(MYSQLCPPCONN_INCLUDE_DIR mysql_driver.h)
  find_library(MYSQLCPPCONN_LIBRARY mysqlcppconn)
  find_package(Boost QUIET)  # mysqlcppconn 1.1 headers include boost/shared_ptr.hpp
  if(MYSQLCPPCONN_INCLUDE_DIR AND MYSQLCPPCONN_LIBRARY AND Boost_FOUND)
    set(_sg_found TRUE)
  endif()
endif()
sqlguard_feature_resolve(SQLGUARD_WITH_MYSQL mysql "${_sg_found}"
  "libmysqlcppconn-dev (mysql_driver.h, libmysqlcppconn) and libboost-dev")
if(SQLGUARD_WITH_MYSQL)
  target_sources(sqlguard PRIVATE src/dialect/mysql/connection.cpp src/dialect/mysql/errors.cpp
    src/dialect/mysql/factory.cpp src/dialect/mysql/doctor.cpp src/dialect/mysql/galera_checks.cpp)
  target_include_directories(sqlguard SYSTEM PRIVATE ${MYSQLCPPCONN_INCLUDE_DIR} ${Boost_INCLUDE_DIRS})
  target_link_libraries(sqlguard PRIVATE ${MYSQLCPPCONN_LIBRARY})
  list(APPEND SQLGUARD_PC_LIBS_PRIVATE -lmysqlcppconn)
else()
  target_sources(sqlguard PRIVATE src/dialect/mysql/missing.cpp)
  list(APPEND SQLGUARD_HEADERS_NOT_BUILT mysql.h)  # its escape hatch is not installed
endif()
