//! The resampling schemes of the bootstrap (model vignette §14), for either
//! likelihood: the [`Resampling`] names, the animals' groups and the draws
//! ([`draws`]) that redraw data.
//!
//! A factor varies between animals when every animal is observed under one
//! level of it only (genotype, age), and animals sharing all such levels form
//! a group; the `animals` scheme redraws animals with replacement within
//! their group, so a group keeps its size.

pub(crate) mod draws;

use crate::design::{Design, ParameterRole};
use crate::outcome::FitSummary;

/// What a likelihood's fitted plan offers the bootstrap: its estimates'
/// names and roles, the animals' groups, and one replicate. Each likelihood
/// implements it beside its fit ([`crate::nb`], [`crate::original`]); the
/// bootstrap holds either and asks through this.
pub(crate) trait ReplicatePlan {
    /// The likelihood's name as R knows it.
    fn likelihood(&self) -> &'static str;
    /// The names of the estimates a fit reports, in order.
    fn parameter_names(&self) -> Vec<String>;
    /// The role of every estimate, in the same order.
    fn parameter_roles(&self) -> Result<Vec<ParameterRole>, String>;
    /// Per random level, its group under the `animals` scheme.
    fn animal_groups(&self) -> Vec<usize>;
    /// Replicate `replicate` (from 1) of the bootstrap seeded with `seed`.
    fn run_replicate(
        &self,
        scheme: Resampling,
        seed: u64,
        replicate: usize,
    ) -> Result<FitSummary, String>;
}

/// How a replicate redraws the data (model vignette §14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resampling {
    /// Tokens within each (animal, context, gene, treatment, bin) cell.
    Cells,
    /// Animals within the groups that share their between-animal levels.
    Animals,
    /// Random effects and counts from the fitted model (count likelihood).
    Parametric,
}

impl Resampling {
    pub(crate) const ALL: [Resampling; 3] = [
        Resampling::Cells,
        Resampling::Animals,
        Resampling::Parametric,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Resampling::Cells => "cells",
            Resampling::Animals => "animals",
            Resampling::Parametric => "parametric",
        }
    }

    pub(crate) fn parse(name: &str) -> std::result::Result<Self, String> {
        Self::ALL.into_iter().find(|s| s.name() == name).ok_or_else(|| {
            format!(
                "unknown resampling scheme \"{name}\"; the schemes are \"cells\", \"animals\" and \"parametric\""
            )
        })
    }
}

/// Per fixed-effect factor: whether every animal with data is observed under
/// a single level of it. `has_data(animal, context, treatment)` says whether
/// an animal has any observation there.
pub(crate) fn between_animal_factors(
    design: &Design,
    animals: usize,
    has_data: impl Fn(usize, usize, usize) -> bool,
) -> Vec<bool> {
    let factors = design.factors().len();
    let contexts = design.contexts().len();
    let mut between = vec![true; factors];
    for animal in 0..animals {
        let mut seen: Vec<Option<usize>> = vec![None; factors];
        for context in 0..contexts {
            for (t, treatment) in design.treatments().iter().enumerate() {
                if !has_data(animal, context, t) {
                    continue;
                }
                for (f, &level) in treatment.levels.iter().enumerate() {
                    match seen[f] {
                        None => seen[f] = Some(level),
                        Some(earlier) if earlier != level => between[f] = false,
                        _ => {}
                    }
                }
            }
        }
    }
    between
}

/// The group of every animal, numbered from 0 in order of first appearance.
/// Animals without any data share a group of their own.
pub(crate) fn animal_groups(
    design: &Design,
    animals: usize,
    has_data: impl Fn(usize, usize, usize) -> bool,
) -> Vec<usize> {
    let between = between_animal_factors(design, animals, &has_data);
    let contexts = design.contexts().len();
    let mut keys: Vec<Option<Vec<usize>>> = Vec::new();
    (0..animals)
        .map(|animal| {
            let key = (0..contexts)
                .flat_map(|c| (0..design.treatment_count()).map(move |t| (c, t)))
                .find(|&(c, t)| has_data(animal, c, t))
                .map(|(_, t)| {
                    design.treatments()[t]
                        .levels
                        .iter()
                        .zip(&between)
                        .filter(|(_, &b)| b)
                        .map(|(&level, _)| level)
                        .collect::<Vec<usize>>()
                });
            match keys.iter().position(|k| *k == key) {
                Some(group) => group,
                None => {
                    keys.push(key);
                    keys.len() - 1
                }
            }
        })
        .collect()
}

/// One draw of the animals: slot r gets an animal of r's group, uniformly
/// with replacement (`pick(n)` is uniform below n).
pub(crate) fn draw_animals(groups: &[usize], mut pick: impl FnMut(usize) -> usize) -> Vec<usize> {
    groups
        .iter()
        .map(|&group| {
            let members: Vec<usize> = (0..groups.len()).filter(|&a| groups[a] == group).collect();
            members[pick(members.len())]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::design::Factor;

    fn design() -> Design {
        let levels = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Design::new(
            levels(&["ctx"]),
            levels(&["g"]),
            levels(&["a", "b", "c", "d"]),
            vec![
                Factor::new("genotype", levels(&["KO", "WT"])),
                Factor::new("hemisphere", levels(&["left", "right"])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn nested_animals_form_groups_by_their_between_levels() {
        let design = design();
        // Animals 0, 1 are KO, 2, 3 WT; all are seen in both hemispheres.
        let has_data = |animal: usize, _c: usize, t: usize| {
            let genotype = design.treatments()[t].levels[0];
            genotype == usize::from(animal >= 2)
        };
        assert_eq!(
            between_animal_factors(&design, 4, has_data),
            vec![true, false]
        );
        assert_eq!(animal_groups(&design, 4, has_data), vec![0, 0, 1, 1]);
        let mut next = 0;
        let draw = draw_animals(&[0, 0, 1, 1], |n| {
            next += 1;
            next % n
        });
        assert!(draw[0] < 2 && draw[1] < 2 && draw[2] >= 2 && draw[3] >= 2);
    }

    #[test]
    fn crossed_animals_are_one_group() {
        let design = design();
        assert_eq!(
            between_animal_factors(&design, 4, |_, _, _| true),
            vec![false, false]
        );
        assert_eq!(animal_groups(&design, 4, |_, _, _| true), vec![0; 4]);
    }
}
