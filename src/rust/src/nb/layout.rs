//! The count model's reported parameter vector (model vignette §8): the fixed
//! effects β and the animals' random effects in the original's layout and
//! names, then the random-effect standard deviations per species, then the
//! dispersions per (context, species).

use crate::design::ParameterLayout;
use crate::design::{Design, ParameterRole, Structure, WarpKind};

/// What one reported value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CountRole {
    /// A β or a random effect (its conditional mode), as in the original.
    Original(ParameterRole),
    /// The standard deviation of a random effect of a species.
    Deviation { kind: WarpKind, species: usize },
    /// The dispersion φ of a (context, species).
    Dispersion { context: usize, species: usize },
}

/// Positions of the reported values.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CountLayout {
    pub original: ParameterLayout,
    contexts: usize,
    species: usize,
    has_random_effects: bool,
}

impl CountLayout {
    pub fn new(design: &Design, structure: &Structure) -> Result<Self, String> {
        Ok(CountLayout {
            original: ParameterLayout::new(design, structure)?,
            contexts: design.contexts().len(),
            species: design.species().len(),
            has_random_effects: design.ran_levels().len() >= 2,
        })
    }

    /// First standard deviation (= number of β and random effects).
    pub fn deviation_start(&self) -> usize {
        self.original.len()
    }

    /// Index of a species' standard deviation of one warp kind.
    pub fn deviation_index(&self, kind: WarpKind, species: usize) -> Option<usize> {
        let offset = WarpKind::ALL.iter().position(|&k| k == kind)?;
        (self.has_random_effects && species < self.species)
            .then(|| self.deviation_start() + 3 * species + offset)
    }

    pub fn dispersion_start(&self) -> usize {
        self.deviation_start()
            + if self.has_random_effects {
                3 * self.species
            } else {
                0
            }
    }

    pub fn dispersion_index(&self, context: usize, species: usize) -> Option<usize> {
        (context < self.contexts && species < self.species)
            .then(|| self.dispersion_start() + context * self.species + species)
    }

    pub fn len(&self) -> usize {
        self.dispersion_start() + self.contexts * self.species
    }

    pub fn roles(&self) -> Vec<CountRole> {
        let mut roles: Vec<CountRole> = self
            .original
            .roles()
            .into_iter()
            .map(CountRole::Original)
            .collect();
        if self.has_random_effects {
            for species in 0..self.species {
                for kind in WarpKind::ALL {
                    roles.push(CountRole::Deviation { kind, species });
                }
            }
        }
        for context in 0..self.contexts {
            for species in 0..self.species {
                roles.push(CountRole::Dispersion { context, species });
            }
        }
        roles
    }

    pub fn names(&self, design: &Design) -> Vec<String> {
        let mut names = self.original.names(design);
        for role in &self.roles()[self.original.len()..] {
            names.push(match *role {
                CountRole::Deviation { kind, species } => {
                    format!("sd_{}_{}", kind.name(), design.species()[species])
                }
                CountRole::Dispersion { context, species } => format!(
                    "dispersion_{}_{}",
                    design.contexts()[context],
                    design.species()[species]
                ),
                CountRole::Original(_) => unreachable!("original roles come first"),
            });
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::small_model;
    use super::*;

    #[test]
    fn names_are_unique_and_follow_the_original_ones() {
        let model = small_model(1);
        let layout = CountLayout::new(model.design(), model.structure()).unwrap();
        let names = layout.names(model.design());
        assert_eq!(names.len(), layout.len());
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert_eq!(
            names[layout.deviation_index(WarpKind::Rate, 1).unwrap()],
            "sd_rate_gene2"
        );
        assert_eq!(
            names[layout.dispersion_index(1, 0).unwrap()],
            "dispersion_context2_gene1"
        );
        assert!(names[0].starts_with("baseline_context1_Rt_gene1"));
    }
}
