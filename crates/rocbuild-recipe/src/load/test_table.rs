//! `[test]`: the folders it copies and creates stay inside the run's folder, its ranges and
//! names are real ones, and a device selection says how it selects.

use crate::error::RecipeError;
use crate::names::Below;
use crate::schema::RawRecipe;

use super::{Checker, FLAVOR_NAMES, OS_NAMES};

impl Checker<'_> {
    pub(super) fn test_table(&self, raw: &RawRecipe) -> Result<(), RecipeError> {
        let Some(t) = &raw.test else {
            return Ok(());
        };
        if t.files.is_empty() {
            return Err(self.err(
                0..0,
                "`[test] files` is empty",
                "",
                Some("name the checkout's test folders and the resources they read, such as files = [\"test\"]".into()),
            ));
        }
        for f in &t.files {
            self.relative(f, "files", Below::Checkout, false)?;
        }
        for d in &t.dirs {
            self.relative(d, "dirs", Below::Checkout, false)?;
        }
        if let Some(d) = &t.device {
            if d.marker.is_none() == d.keyword.is_none() {
                return Err(self.err(
                    0..0,
                    "`[test.device]` needs exactly one of `marker` and `keyword`",
                    "",
                    Some("marker = \"cuda\" selects the tests marked @pytest.mark.cuda; keyword = \"cuda or gpu\" those whose names match".into()),
                ));
            }
        }
        for o in &t.optional_module {
            let module_ok = !o.module.is_empty()
                && o.module
                    .split('.')
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'));
            if !module_ok || o.marker.is_none() == o.keyword.is_none() {
                return Err(self.err(
                    0..0,
                    format!(
                        "`[[test.optional-module]]` `{}` needs a module name and exactly one of `marker` and `keyword`",
                        o.module
                    ),
                    "",
                    Some("module = \"torch\" with keyword = \"torch\" deselects the tests whose names match when the venv has no torch".into()),
                ));
            }
        }
        for k in &t.known_failure {
            if k.test.get_ref().trim().is_empty() {
                return Err(self.err(
                    k.test.span(),
                    "a known failure names no test",
                    "empty",
                    Some("write the pytest node id, such as \"test/test_ops.py::test_x\"".into()),
                ));
            }
            if let Some(v) = &k.versions {
                self.specifier(v)?;
            }
            for os in &k.os {
                self.key_in(os, OS_NAMES, "operating system")?;
            }
            for f in &k.flavors {
                self.key_in(f, FLAVOR_NAMES, "torch flavor")?;
            }
        }
        Ok(())
    }
}
