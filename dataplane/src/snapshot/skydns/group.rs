//! SkyDNS groups (`msg.Group`): records that share a subtree can be told apart by a `group` so
//! that a directory answers only with the group of its shallowest grouped record, plus every
//! record without a group. The exact scan is order dependent; the builder feeds it in key order.

/// Filters `items` (entries, in answer order) by group. `key` gives an item's depth and group
/// (the default value, such as an empty string, is none). `None` means every item stays.
pub fn filter<T: Copy, G: PartialEq + Default>(items: &[T], key: impl Fn(T) -> (u8, G)) -> Option<Vec<T>> {
    let &first = items.first()?;
    let (mut depth, mut group) = key(first);
    // Depths SkyDNS records before it stops scanning; later items never count as "same level".
    let mut scanned = items.len();
    for (i, &item) in items.iter().enumerate() {
        let (d, g) = key(item);
        if d < depth {
            if g == G::default() {
                scanned = i + 1;
                break;
            }
            depth = d;
            group = g;
        }
    }
    if group == G::default() {
        return None;
    }
    let mut kept = Vec::with_capacity(items.len());
    for (i, &item) in items.iter().enumerate() {
        let (d, g) = key(item);
        if g == G::default() || g == group {
            kept.push(item);
        } else if i < scanned && d == depth {
            // Two groups at the shallowest level: SkyDNS gives up and keeps everything.
            return None;
        }
    }
    Some(kept)
}

#[cfg(test)]
mod tests {
    use super::filter;

    /// Runs the filter over `(depth, group)` pairs and returns the kept positions.
    fn kept(records: &[(u8, u32)]) -> Vec<u32> {
        let items: Vec<u32> = (0..records.len() as u32).collect();
        filter(&items, |i| records[i as usize]).unwrap_or(items)
    }

    #[test]
    fn records_without_groups_are_all_kept() {
        assert_eq!(kept(&[(2, 0), (3, 0)]), [0, 1]);
    }

    #[test]
    fn the_shallowest_group_wins_and_ungrouped_records_stay() {
        assert_eq!(kept(&[(3, 2), (2, 1), (3, 0), (4, 1), (4, 3)]), [1, 2, 3]);
    }

    #[test]
    fn two_groups_at_the_shallowest_level_disable_filtering() {
        assert_eq!(kept(&[(2, 1), (2, 2), (3, 3)]), [0, 1, 2]);
    }

    #[test]
    fn an_ungrouped_first_record_disables_filtering() {
        assert_eq!(kept(&[(2, 0), (3, 1), (3, 2)]), [0, 1, 2]);
    }

    #[test]
    fn a_shallower_ungrouped_record_stops_the_scan() {
        // The scan stops at item 1, so item 2 at the same depth is not a disagreement: it is
        // simply of another group and dropped.
        assert_eq!(kept(&[(3, 1), (2, 0), (2, 2)]), [0, 1]);
    }

    #[test]
    fn deeper_records_of_the_winning_group_stay() {
        assert_eq!(kept(&[(2, 1), (3, 1), (3, 2)]), [0, 1]);
    }
}
