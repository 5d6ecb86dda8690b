/* C99 complex functions for a native ucrtbase.dll shim under Wine 8 (see ucrt.rs): the ones
 * Wine leaves as aborting stubs. No CRT: the real math comes from Wine's ucrtbase, renamed
 * ucrtwine.dll. Types and calling conventions are MSVC's: _Fcomplex (8 bytes) in a register,
 * _Dcomplex / _Lcomplex (long double is double) by reference. Textbook formulas, not
 * bit-exact: enough for programs under test to run. */

typedef struct { double v[2]; } dc;
typedef struct { float v[2]; } fc;

int _fltused = 0;

double exp(double);
double log(double);
double sqrt(double);
double sin(double);
double cos(double);
double sinh(double);
double cosh(double);
double atan2(double, double);
double _hypot(double, double);

#define RE(z) ((z).v[0])
#define IM(z) ((z).v[1])

static const double LN10 = 2.30258509299404568402;
static const double PI_2 = 1.57079632679489661923;

static dc mk(double re, double im) { dc z; z.v[0] = re; z.v[1] = im; return z; }
static double sq(double x) { return sqrt(x); }
static double fab(double x) { return __builtin_fabs(x); }
static double sgn(double mag, double sign) { return __builtin_copysign(mag, sign); }
/* -i * z: (x + iy) -> (y - ix) */
static dc times_minus_i(dc z) { return mk(IM(z), -RE(z)); }
/* i * z */
static dc times_i(dc z) { return mk(-IM(z), RE(z)); }

dc shim__Cbuild(double re, double im) { return mk(re, im); }
dc shim__Cmulcc(dc a, dc b) { return mk(RE(a) * RE(b) - IM(a) * IM(b), RE(a) * IM(b) + IM(a) * RE(b)); }
dc shim__Cmulcr(dc a, double b) { return mk(RE(a) * b, IM(a) * b); }
double shim_creal(dc z) { return RE(z); }
double shim_cimag(dc z) { return IM(z); }
dc shim_conj(dc z) { return mk(RE(z), -IM(z)); }
double shim_cabs(dc z) { return _hypot(RE(z), IM(z)); }
double shim_norm(dc z) { return RE(z) * RE(z) + IM(z) * IM(z); }
double shim_carg(dc z) { return atan2(IM(z), RE(z)); }

dc shim_cproj(dc z) {
    if (__builtin_isinf(RE(z)) || __builtin_isinf(IM(z)))
        return mk(__builtin_inf(), sgn(0.0, IM(z)));
    return z;
}

dc shim_cexp(dc z) {
    double e = exp(RE(z));
    if (IM(z) == 0.0) return mk(e, IM(z));
    return mk(e * cos(IM(z)), e * sin(IM(z)));
}

dc shim_clog(dc z) { return mk(log(shim_cabs(z)), shim_carg(z)); }

dc shim_clog10(dc z) {
    dc l = shim_clog(z);
    return mk(RE(l) / LN10, IM(l) / LN10);
}

dc shim_csqrt(dc z) {
    double a = RE(z), b = IM(z), t;
    if (a == 0.0 && b == 0.0) return mk(0.0, b);
    t = sq((fab(a) + shim_cabs(z)) * 0.5);
    if (a >= 0.0) return mk(t, b / (2.0 * t));
    return mk(fab(b) / (2.0 * t), sgn(t, b));
}

dc shim_cpow(dc x, dc y) {
    if (RE(x) == 0.0 && IM(x) == 0.0)
        return (RE(y) == 0.0 && IM(y) == 0.0) ? mk(1.0, 0.0) : mk(0.0, 0.0);
    return shim_cexp(shim__Cmulcc(y, shim_clog(x)));
}

dc shim_csin(dc z) { return mk(sin(RE(z)) * cosh(IM(z)), cos(RE(z)) * sinh(IM(z))); }
dc shim_ccos(dc z) { return mk(cos(RE(z)) * cosh(IM(z)), -sin(RE(z)) * sinh(IM(z))); }
dc shim_csinh(dc z) { return mk(sinh(RE(z)) * cos(IM(z)), cosh(RE(z)) * sin(IM(z))); }
dc shim_ccosh(dc z) { return mk(cosh(RE(z)) * cos(IM(z)), sinh(RE(z)) * sin(IM(z))); }

dc shim_ctanh(dc z) {
    double a = RE(z), b = IM(z), d;
    if (fab(a) > 20.0) return mk(sgn(1.0, a), sgn(0.0, sin(2.0 * b)));
    d = cosh(2.0 * a) + cos(2.0 * b);
    return mk(sinh(2.0 * a) / d, sin(2.0 * b) / d);
}

/* tan z = -i tanh(iz) */
dc shim_ctan(dc z) { return times_minus_i(shim_ctanh(times_i(z))); }

/* asinh z = log(z + sqrt(z^2 + 1)) */
dc shim_casinh(dc z) {
    dc w = shim__Cmulcc(z, z);
    RE(w) += 1.0;
    w = shim_csqrt(w);
    return shim_clog(mk(RE(z) + RE(w), IM(z) + IM(w)));
}

/* asin z = -i asinh(iz) */
dc shim_casin(dc z) { return times_minus_i(shim_casinh(times_i(z))); }

/* acos z = pi/2 - asin z */
dc shim_cacos(dc z) {
    dc s = shim_casin(z);
    return mk(PI_2 - RE(s), -IM(s));
}

/* acosh z = log(z + sqrt(z + 1) sqrt(z - 1)) */
dc shim_cacosh(dc z) {
    dc p = shim__Cmulcc(shim_csqrt(mk(RE(z) + 1.0, IM(z))), shim_csqrt(mk(RE(z) - 1.0, IM(z))));
    return shim_clog(mk(RE(z) + RE(p), IM(z) + IM(p)));
}

/* atanh z = (log(1 + z) - log(1 - z)) / 2 */
dc shim_catanh(dc z) {
    dc a = shim_clog(mk(1.0 + RE(z), IM(z)));
    dc b = shim_clog(mk(1.0 - RE(z), -IM(z)));
    return mk(0.5 * (RE(a) - RE(b)), 0.5 * (IM(a) - IM(b)));
}

/* atan z = -i atanh(iz) */
dc shim_catan(dc z) { return times_minus_i(shim_catanh(times_i(z))); }

static dc up(fc z) { return mk(z.v[0], z.v[1]); }
static fc down(dc z) { fc r; r.v[0] = (float)z.v[0]; r.v[1] = (float)z.v[1]; return r; }

#define COMPLEX_F(n) fc shim_##n##f(fc z) { return down(shim_##n(up(z))); }
#define REAL_F(n) float shim_##n##f(fc z) { return (float)shim_##n(up(z)); }

COMPLEX_F(cacos) COMPLEX_F(cacosh) COMPLEX_F(casin) COMPLEX_F(casinh) COMPLEX_F(catan)
COMPLEX_F(catanh) COMPLEX_F(ccos) COMPLEX_F(ccosh) COMPLEX_F(cexp) COMPLEX_F(clog)
COMPLEX_F(clog10) COMPLEX_F(conj) COMPLEX_F(cproj) COMPLEX_F(csin) COMPLEX_F(csinh)
COMPLEX_F(csqrt) COMPLEX_F(ctan) COMPLEX_F(ctanh)
REAL_F(cabs) REAL_F(carg) REAL_F(cimag) REAL_F(creal) REAL_F(norm)

fc shim_cpowf(fc x, fc y) { return down(shim_cpow(up(x), up(y))); }
fc shim__FCbuild(float re, float im) { fc r; r.v[0] = re; r.v[1] = im; return r; }
fc shim__FCmulcc(fc a, fc b) { return down(shim__Cmulcc(up(a), up(b))); }
fc shim__FCmulcr(fc a, float b) { return down(shim__Cmulcr(up(a), b)); }
