/* profile_html.c: placeholder */
#include "profile.h"
#include "profile_out.h"
int vf__prof_write_html(const vf_profile *p, FILE *f)
{
    (void)p;
    fprintf(f, "<html></html>\n");
    return 0;
}
