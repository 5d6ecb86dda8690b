use miette::{Diagnostic, NamedSource, SourceSpan};
use thiserror::Error;

/// The recipe's text with the offending span marked.
#[derive(Debug, Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(code(rocbuild::recipe::invalid))]
pub struct InvalidRecipe {
    message: String,
    #[source_code]
    src: NamedSource<String>,
    #[label("{label}")]
    span: SourceSpan,
    label: String,
    #[help]
    help: Option<String>,
}

/// A problem with a recipe file, pointing at the offending text.
#[derive(Debug, Error, Diagnostic)]
pub enum RecipeError {
    /// Boxed: the recipe's whole text travels with it, and every `Result` carries the size.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Invalid(Box<InvalidRecipe>),

    #[error("cannot read recipe file {path}: {source}")]
    #[diagnostic(
        code(rocbuild::recipe::io),
        help("check that the file exists and is readable")
    )]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },

    #[error("unknown recipe `{name}`")]
    #[diagnostic(code(rocbuild::recipe::unknown))]
    Unknown {
        name: String,
        #[help]
        help: String,
    },

    #[error("recipe `{recipe}` has no release {version}")]
    #[diagnostic(code(rocbuild::recipe::no_release))]
    NoRelease {
        recipe: String,
        version: String,
        #[help]
        help: String,
    },
}

impl RecipeError {
    /// An error at `span` of the recipe `file` whose text is `text`.
    pub fn at(
        file: &str,
        text: &str,
        span: std::ops::Range<usize>,
        message: impl Into<String>,
        label: impl Into<String>,
        help: Option<String>,
    ) -> Self {
        let message = message.into();
        let (line, col) = line_col(text, span.start);
        RecipeError::Invalid(Box::new(InvalidRecipe {
            message: format!("{file}:{line}:{col}: {message}"),
            src: NamedSource::new(file, text.to_string()),
            span: span.into(),
            label: label.into(),
            help,
        }))
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary_compat(offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

trait FloorCharBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorCharBoundary for str {
    fn floor_char_boundary_compat(&self, mut i: usize) -> usize {
        while i > 0 && !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

/// The candidate nearest to `word`, when it is close enough to be a likely typo.
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}
