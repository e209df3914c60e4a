/*
 * webui.c - the chat page (webui.html, beside this file) compiled into the
 * binary: the assembler includes the file's bytes, NUL-terminated, as
 * srv_webui_html. Served at / by http.c. Read-only data; any thread.
 */
#include "server/server.h"

__asm__(".section .rodata\n"
        ".global srv_webui_html\n"
        ".type srv_webui_html, %object\n"
        ".balign 16\n"
        "srv_webui_html:\n"
        ".incbin \"src/server/webui.html\"\n"
        ".byte 0\n"
        ".size srv_webui_html, . - srv_webui_html\n"
        ".previous\n");
