# `cmake --install BUILD [--prefix DIR]`: the libraries a C++ program of others links
# (shardify::reader and what it needs: format, storage, base; shardify::media), the public
# headers of docs/cpp.md under include/shardify/, and a CMake package:
#   find_package(shardify REQUIRED)
#   target_link_libraries(app PRIVATE shardify::reader)
# The converter and the trainer are used through their programs and the Python package.
include(CMakePackageConfigHelpers)

# Target, the name it has in the package (shardify::<name>).
set(SHARDIFY_EXPORTED
    shardify_base base shardify_storage storage shardify_schemas schemas shardify_format format
    shardify_media media shardify_reader reader)
set(SHARDIFY_EXPORTED_TARGETS)
while(SHARDIFY_EXPORTED)
  list(POP_FRONT SHARDIFY_EXPORTED target name)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  add_library(shardify::${name} ALIAS ${target})
  list(APPEND SHARDIFY_EXPORTED_TARGETS ${target})
endwhile()

# The public headers (docs/cpp.md lists each; every header one of them includes is one of
# them too: the install test checks both).
set(SHARDIFY_PUBLIC_HEADERS
    base/status.h base/file.h base/parallel.h base/checksum.h base/strings.h
    storage/location.h storage/transfer.h storage/cache.h storage/remote.h
    format/types.h format/layout.h format/manifest.h format/writer.h format/dataset.h format/chunk_grid.h
    format/chunk_cache.h format/chunking.h format/fields.h format/parts.h format/moments.h format/manifest_dict.h
    media/png.h media/canvas.h media/plot.h media/nifti.h
    reader/loader.h reader/sampler.h reader/patch_sampler.h reader/source_grid.h reader/augment.h)

install(TARGETS ${SHARDIFY_EXPORTED_TARGETS} EXPORT shardifyTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(header ${SHARDIFY_PUBLIC_HEADERS})
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardify/${dir})
endforeach()
set(package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/shardify)
install(EXPORT shardifyTargets NAMESPACE shardify:: DESTINATION ${package_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/shardifyConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/shardifyConfig.cmake INSTALL_DESTINATION ${package_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/shardifyConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/shardifyConfig.cmake ${CMAKE_BINARY_DIR}/shardifyConfigVersion.cmake
        DESTINATION ${package_dir})
