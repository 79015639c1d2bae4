/*
 * report_assets.h: the HTML report's fixed files, embedded in the library.
 *
 * The files are src/profile/report/: report.html (the page, with {{...}}
 * markers where html.c writes what changes), report.css (its style sheet)
 * and report.js (its script). cmake/embed.cmake turns them at build time
 * into <build>/generated/report_assets.c, which defines these arrays: each
 * holds its file's bytes and then a NUL, so it is a C string.
 */
#ifndef VF_PROFILE_REPORT_ASSETS_H
#define VF_PROFILE_REPORT_ASSETS_H

extern const char vf__report_html[];
extern const char vf__report_css[];
extern const char vf__report_js[];

#endif /* VF_PROFILE_REPORT_ASSETS_H */
