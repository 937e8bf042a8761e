-- items whose order is a 2021 order: the IN subquery's orders files send their ids to items
SELECT i.order_id, sum(i.qty)
FROM items i
WHERE i.order_id IN (SELECT o.id FROM orders o WHERE o.day >= DATE '2021-01-01')
GROUP BY i.order_id
