# The Debian package: `cpack -G DEB` on this build (no rebuild), then a real dpkg install of
# it that touches nothing of this machine, then the packaged k3host runs:
#   1. The control fields: Package k3host, Version the project's, a Maintainer, and a
#      Depends that covers every shared library the packaged ELF files need and the package
#      does not ship (each such library's owning package, by dpkg -S, must be in Depends).
#   2. dpkg -i with --root = an empty folder seeded with a COPY of this machine's dpkg
#      database (status, file lists, diversions). dpkg then checks the Depends against the
#      packages really installed here and the files against the files they own, exactly as a
#      plain `dpkg -i` would, and refuses on any problem; it unpacks into that folder only,
#      and the maintainer scripts run (unchrooted, with a stub ldconfig). "Installed
#      cleanly" = exit 0, no warning or error, status "install ok installed", postinst ran.
#   3. The packaged k3host (<root>/usr/bin/k3host, prefix /usr moved into <root>) runs from
#      another folder: installed/check_installed.cmake (--list-presets, --config laptop, an
#      unknown preset, the demo generated in the user's data folder).
#   4. dpkg -r removes it again (postrm ran) and leaves no file behind.
# dpkg needs root to install; as another user the test is skipped (it prints "SKIP: not root",
# which ctest's SKIP_REGULAR_EXPRESSION matches: a -P script of CMake < 3.29 cannot exit 77).
# Included by tests/CMakeLists.txt (registers the test); run by ctest with cmake -P.
if(NOT CMAKE_SCRIPT_MODE_FILE)
  add_test(NAME "install: the Debian package builds with cpack and installs, runs and removes cleanly"
           COMMAND ${CMAKE_COMMAND}
             -DBUILD_DIR=${CMAKE_BINARY_DIR}
             -DCPACK=${CMAKE_CPACK_COMMAND}
             -DVERSION=${PROJECT_VERSION}
             -DWORK=${CMAKE_BINARY_DIR}/test-tmp/deb-package
             -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties("install: the Debian package builds with cpack and installs, runs and removes cleanly"
                       PROPERTIES TIMEOUT 300 SKIP_REGULAR_EXPRESSION "SKIP: not root"
                       # no-sanitizer: it tests packaging (cpack, dpkg); the installed binaries'
                       # runs are the install-tree test's, which the sanitize build keeps.
                       LABELS no-sanitizer)
  return()
endif()
cmake_policy(VERSION 3.20)  # a -P script starts with no policies: quoted if() arguments, IN_LIST

include(${CMAKE_CURRENT_LIST_DIR}/installed/check_installed.cmake)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "${what} failed (${rc}):\n${cmd}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
  set(run_error "${err}" PARENT_SCOPE)
endfunction()

foreach(tool dpkg dpkg-deb dpkg-shlibdeps readelf)
  find_program(have_${tool} ${tool})
  if(NOT have_${tool})
    message(FATAL_ERROR "${tool} is needed (tools/install-deps.sh installs dpkg-dev and binutils)")
  endif()
endforeach()
execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT uid STREQUAL "0")
  message(STATUS "SKIP: not root (dpkg cannot install the package)")
  return()
endif()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/out)

# 1. Build the package from this build and read its control fields.
run("cpack -G DEB" ${CPACK} -G DEB --config ${BUILD_DIR}/CPackConfig.cmake -B ${WORK}/out)
file(GLOB debs ${WORK}/out/*.deb)
list(LENGTH debs n_debs)
if(NOT n_debs EQUAL 1)
  message(FATAL_ERROR "cpack wrote ${n_debs} .deb files in ${WORK}/out: ${debs}")
endif()
run("dpkg-deb --field" dpkg-deb --field ${debs} Package Version Maintainer Depends Architecture Description)
set(fields "${run_output}")
foreach(expected "Package: k3host\n" "Version: ${VERSION}\n")
  string(FIND "${fields}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the package's control has no '${expected}':\n${fields}")
  endif()
endforeach()
if(NOT fields MATCHES "Maintainer: [^\n]+ <[^\n]+@[^\n]+>" OR NOT fields MATCHES "Description: [^\n]+\n [^\n]+")
  message(FATAL_ERROR "the package needs a Maintainer (name <address>) and a Description with a long part:\n${fields}")
endif()
string(REGEX MATCH "Depends: ([^\n]+)" depends_line "${fields}")
set(depends "${CMAKE_MATCH_1}")
if(depends STREQUAL "")
  message(FATAL_ERROR "the package has no Depends:\n${fields}")
endif()
string(REGEX MATCHALL "(^|, )[a-z0-9][a-z0-9.+-]+" depends_names "${depends}")
list(TRANSFORM depends_names REPLACE "^, " "")

# Every library the packaged ELF files need and the package does not ship comes from a
# package named in Depends.
set(unpacked ${WORK}/contents)
run("dpkg-deb -x" dpkg-deb -x ${debs} ${unpacked})
file(GLOB_RECURSE files LIST_DIRECTORIES false ${unpacked}/*)
set(shipped "")
set(needed "")
foreach(f IN LISTS files)
  if(IS_SYMLINK ${f})
    continue()
  endif()
  execute_process(COMMAND readelf -d ${f} RESULT_VARIABLE rc OUTPUT_VARIABLE dyn ERROR_QUIET)
  if(NOT rc EQUAL 0)
    continue()  # not an ELF file
  endif()
  get_filename_component(name ${f} NAME)
  list(APPEND shipped ${name})
  string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]+\\]" entries "${dyn}")
  foreach(e IN LISTS entries)
    string(REGEX REPLACE "^.*\\[([^]]+)\\]$" "\\1" lib "${e}")
    list(APPEND needed ${lib})
  endforeach()
endforeach()
list(REMOVE_DUPLICATES needed)
run("ldconfig -p" ldconfig -p)
set(cache "${run_output}")
set(checked 0)
foreach(lib IN LISTS needed)
  if(lib IN_LIST shipped)
    continue()
  endif()
  string(REPLACE "." "\\." pattern "${lib}")  # sonames hold '.' and '+'
  string(REPLACE "+" "\\+" pattern "${pattern}")
  string(REGEX MATCH "\t${pattern} \\([^)]*\\) => ([^\n]+)" hit "${cache}")
  if(NOT hit)
    message(FATAL_ERROR "the packaged files need ${lib}, which neither the package nor this system has")
  endif()
  set(path "${CMAKE_MATCH_1}")
  file(REAL_PATH ${path} real)
  # The file itself (with /lib -> /usr/lib merged, only its real path is in the database).
  execute_process(COMMAND dpkg -S ${real} OUTPUT_VARIABLE owner RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0)
    execute_process(COMMAND dpkg -S ${path} OUTPUT_VARIABLE owner RESULT_VARIABLE rc ERROR_QUIET)
  endif()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${lib} (${path}) belongs to no Debian package")
  endif()
  string(REGEX REPLACE "^([^:,]+).*$" "\\1" owner "${owner}")
  # The owner, or a name it provides (libspdlog1.10 provides libspdlog1.10-fmt9, which its
  # shlibs file names), must be in Depends.
  execute_process(COMMAND dpkg-query -W "-f=\${Provides}" ${owner} OUTPUT_VARIABLE provides ERROR_QUIET)
  string(REGEX MATCHALL "[a-z0-9][a-z0-9.+-]+" provided "${provides}")
  set(named FALSE)
  foreach(name IN LISTS owner provided)
    if(name IN_LIST depends_names)
      set(named TRUE)
    endif()
  endforeach()
  if(NOT named)
    message(FATAL_ERROR "the packaged files need ${lib} from the package '${owner}', which Depends does not name:\n"
                        "Depends: ${depends}")
  endif()
  math(EXPR checked "${checked} + 1")
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "no shared library dependency was checked: the ELF scan found nothing")
endif()

# 2. A real dpkg install against a copy of this machine's package database, into a folder.
# dpkg wants the database inside the install root (--root). The package's maintainer scripts
# (CPack's postinst/postrm run ldconfig, for libk3core in /usr/lib) run without a chroot,
# as the folder holds no shell; a stub ldconfig first on PATH records their calls, so this
# machine's ld.so.cache is not rewritten.
set(root ${WORK}/root)
set(admin ${root}/var/lib/dpkg)
file(MAKE_DIRECTORY ${admin}/info ${admin}/updates ${admin}/triggers)
foreach(f status diversions statoverride)
  if(EXISTS /var/lib/dpkg/${f})
    configure_file(/var/lib/dpkg/${f} ${admin}/${f} COPYONLY)
  endif()
endforeach()
file(GLOB lists /var/lib/dpkg/info/*.list)
file(COPY ${lists} DESTINATION ${admin}/info)
set(stub ${WORK}/stub-bin)
file(WRITE ${stub}/ldconfig "#!/bin/sh\necho \"ldconfig $*\" >> '${WORK}/ldconfig.calls'\n")
file(CHMOD ${stub}/ldconfig PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
set(dpkg ${CMAKE_COMMAND} -E env "PATH=${stub}:$ENV{PATH}"
    dpkg --root=${root} --force-script-chrootless --log=${WORK}/dpkg.log)
run("dpkg -i (into ${root})" ${dpkg} -i ${debs})
string(REGEX MATCHALL "[^\n]*(warning|error)[^\n]*" complaints "${run_output}\n${run_error}")
if(complaints)
  message(FATAL_ERROR "dpkg -i complained:\n${run_output}\n${run_error}")
endif()
run("dpkg -s" dpkg --root=${root} -s k3host)
if(NOT run_output MATCHES "Status: install ok installed")
  message(FATAL_ERROR "k3host is not 'install ok installed' after dpkg -i:\n${run_output}")
endif()
file(READ ${WORK}/ldconfig.calls calls)
if(NOT calls STREQUAL "ldconfig \n")
  message(FATAL_ERROR "the postinst should have run ldconfig once, it ran: '${calls}'")
endif()

# 3. The packaged k3host, from another folder.
k3_check_installed(${root}/usr ${root}/usr/share/k3host ${WORK})

# 4. Removed, it leaves nothing (but dpkg's own database).
run("dpkg -r" ${dpkg} -r k3host)
file(GLOB_RECURSE left LIST_DIRECTORIES false ${root}/*)
list(FILTER left EXCLUDE REGEX "^${root}/var/lib/dpkg/")
if(left)
  message(FATAL_ERROR "dpkg -r left files behind: ${left}")
endif()
execute_process(COMMAND dpkg --root=${root} -s k3host OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT "${out}${err}" MATCHES "not installed|Status: deinstall ok config-files")
  message(FATAL_ERROR "k3host is still installed after dpkg -r:\n${out}${err}")
endif()
file(READ ${WORK}/ldconfig.calls calls)
if(NOT calls STREQUAL "ldconfig \nldconfig \n")
  message(FATAL_ERROR "the postrm should have run ldconfig once more, the calls were: '${calls}'")
endif()
message(STATUS "k3host ${VERSION} .deb: Depends covers ${checked} libraries; installed, ran and removed cleanly")
file(REMOVE_RECURSE ${WORK})
