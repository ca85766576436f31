# Writes OUT, a header holding the text of IN as `inline constexpr const char kWebChatHtml[]`
# (a raw string: the file must not contain the delimiter `)pllm_text"`).
file(READ ${IN} text)
string(FIND "${text}" ")pllm_text\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter")
endif()
file(WRITE ${OUT} "// Generated from ${IN} by cmake/embed_text.cmake; do not edit.\n#pragma once\nnamespace pllm::server {\ninline constexpr const char kWebChatHtml[] = R\"pllm_text(${text})pllm_text\";\n}\n")
