//! The degree (number of transitions) of every (context, species) curve.

use super::MAX_DEGREE;

/// The degree d of every (context, species) curve, context-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Structure {
    contexts: usize,
    species: usize,
    degrees: Vec<usize>,
}

impl Structure {
    /// `degrees[c * species + s]` is the degree of context c, species s.
    pub(crate) fn new(
        contexts: usize,
        species: usize,
        degrees: Vec<usize>,
    ) -> Result<Self, String> {
        let expected = contexts
            .checked_mul(species)
            .ok_or("context × species count overflows")?;
        if degrees.len() != expected {
            return Err(format!(
                "expected {expected} degrees ({contexts} contexts × {species} species), got {}",
                degrees.len()
            ));
        }
        if let Some(position) = degrees.iter().position(|&d| d > MAX_DEGREE) {
            return Err(format!(
                "degree {} at position {position} exceeds the maximum {MAX_DEGREE}",
                degrees[position]
            ));
        }
        Ok(Self {
            contexts,
            species,
            degrees,
        })
    }

    pub(crate) fn contexts(&self) -> usize {
        self.contexts
    }

    pub(crate) fn species(&self) -> usize {
        self.species
    }

    pub(crate) fn degrees(&self) -> &[usize] {
        &self.degrees
    }

    pub(crate) fn degree(&self, context: usize, species: usize) -> usize {
        self.degrees[context * self.species + species]
    }

    pub(crate) fn max_degree(&self) -> usize {
        self.degrees.iter().copied().max().unwrap_or(0)
    }
}
