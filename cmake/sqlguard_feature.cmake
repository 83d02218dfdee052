# Tri-state build options for the optional parts of sqlguard (dialects, the
# Prometheus exporter). Each is a cache entry AUTO / ON / OFF:
#   AUTO (default)  built when its packages are found, silently left out otherwise
#   ON              required: configuring fails, naming the missing package
#   OFF             not built; its packages are not searched for or linked
# After sqlguard_feature_resolve() the same name is a normal variable holding
# the outcome, ON or OFF (it shadows the cache entry, which keeps the request),
# so `if(SQLGUARD_WITH_MYSQL)` anywhere later means "was built".
# Every feature built is appended to SQLGUARD_BUILT_COMPONENTS (the CMake
# package's components: sqlite, postgresql, mysql, prometheus).

# sqlguard_feature(<VAR> <doc>): declares the cache entry; sets <VAR>_WANTED
# (TRUE unless OFF) so the caller knows whether to look for the packages.
function(sqlguard_feature var doc)
  set(${var} AUTO CACHE STRING "${doc}: AUTO (if found), ON (required) or OFF")
  set_property(CACHE ${var} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "$CACHE{${var}}" request)
  if(request STREQUAL "AUTO" OR "${request}")
    set(${var}_WANTED TRUE PARENT_SCOPE)
  else()
    set(${var}_WANTED FALSE PARENT_SCOPE)
  endif()
endfunction()

# sqlguard_feature_resolve(<VAR> <component> <found> <packages>): ON when
# wanted and found; FATAL_ERROR when the request was ON and it is not found.
function(sqlguard_feature_resolve var component found packages)
  string(TOUPPER "$CACHE{${var}}" request)
  if(request STREQUAL "AUTO")
    set(want_required FALSE)
    set(want TRUE)
  elseif("${request}")
    set(want_required TRUE)
    set(want TRUE)
  else()
    set(want FALSE)
  endif()
  if(want AND found)
    set(${var} ON PARENT_SCOPE)
    set(SQLGUARD_BUILT_COMPONENTS ${SQLGUARD_BUILT_COMPONENTS} ${component} PARENT_SCOPE)
  elseif(want AND want_required)
    message(FATAL_ERROR "${var}=${request}, but what it needs was not found: ${packages}. Install it, "
                        "or configure with -D${var}=OFF (leave it out) or -D${var}=AUTO (build it when found).")
  else()
    set(${var} OFF PARENT_SCOPE)
  endif()
endfunction()
