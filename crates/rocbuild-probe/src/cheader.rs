//! The one reader of C header `#define`s (version headers of FFmpeg, HIP, hipBLAS, rocBLAS).

/// The value of `#define NAME VALUE` in `text` (the first token after the name), if any.
pub fn c_define(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some("#define") && w.next() == Some(name))
            .then(|| w.next().map(str::to_string))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_first_token_after_the_name() {
        let t =
            "#define A_MAJOR  59\n#define A_MINOR 39 // note\n# define B 1\n#define A_MAJORX 1\n";
        assert_eq!(super::c_define(t, "A_MAJOR").as_deref(), Some("59"));
        assert_eq!(super::c_define(t, "A_MINOR").as_deref(), Some("39"));
        assert_eq!(super::c_define(t, "B"), None);
        assert_eq!(super::c_define(t, "C"), None);
    }
}
